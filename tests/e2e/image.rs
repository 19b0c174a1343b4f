//! The container image (`make image`, issue 11): built without a container engine as an OCI
//! layout, it runs the binary as a numeric non-root user (what `runAsNonRoot` can verify), its
//! layer holds a static `kubewasm` that runs here, it pushes to a registry under the layout's own
//! digest, and the same binary gives the same digests.
//!
//! `cargo test -p kubewasm-tests --test image`. The first run builds an unoptimized musl binary
//! into the cache (minutes); later runs only rewrite the layout.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Instant;

use kubewasm_tests::build::{Tool, go_tool};
use kubewasm_tests::registry::Registry;
use serde_json::Value;

const BINARY: &str = "usr/local/bin/kubewasm";

/// An image layout written by `make image`.
struct Layout {
    dir: PathBuf,
    _keep: tempfile::TempDir,
}

impl Layout {
    /// Runs `make image` into a fresh directory, saying how long it took.
    fn build(what: &str) -> Layout {
        let keep = tempfile::tempdir().unwrap();
        let dir = keep.path().join("image");
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let started = Instant::now();
        // The release recipe without the optimizer (Cargo.toml, `image-test`): a cold optimized
        // musl build takes about three times as long, and this checks the image, not the code.
        let out = Command::new("make").arg("-C").arg(root).arg("image").env("IMAGE_DIR", &dir).env("IMAGE_PROFILE", "image-test").output().unwrap();
        assert!(out.status.success(), "make image failed:\n{}", String::from_utf8_lossy(&out.stderr));
        eprintln!("make image ({what}) took {:.1} s", started.elapsed().as_secs_f64());
        Layout { dir, _keep: keep }
    }

    fn json(&self, file: &str) -> Value {
        serde_json::from_slice(&std::fs::read(self.dir.join(file)).unwrap()).unwrap()
    }

    fn blob(&self, digest: &str) -> Value {
        self.json(&format!("blobs/sha256/{}", digest.strip_prefix("sha256:").unwrap()))
    }

    /// The digest of the one image manifest the index names.
    fn digest(&self) -> String {
        let index = self.json("index.json");
        let manifests = index["manifests"].as_array().unwrap();
        assert_eq!(manifests.len(), 1, "one image in the layout: {index}");
        manifests[0]["digest"].as_str().unwrap().to_owned()
    }

    fn config(&self) -> Value {
        let manifest = self.blob(&self.digest());
        self.blob(manifest["config"]["digest"].as_str().unwrap())
    }
}

/// The layout the tests share (one build per test process).
fn image() -> &'static Layout {
    static IMAGE: OnceLock<Layout> = OnceLock::new();
    IMAGE.get_or_init(|| Layout::build("first in this test run"))
}

fn crane(args: &[&str]) -> Vec<u8> {
    let out = Command::new(go_tool(Tool::Crane).unwrap()).args(args).output().unwrap();
    assert!(out.status.success(), "crane {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

#[test]
fn config_runs_the_binary_as_a_numeric_non_root_user() {
    let config = image().config();
    let user = config["config"]["User"].as_str().unwrap_or_default();
    // Kubernetes' runAsNonRoot can only verify a numeric user: a name it refuses to start.
    let uid: u32 = user.split(':').next().unwrap().parse().unwrap_or_else(|_| panic!("User {user:?} is not numeric"));
    assert_ne!(uid, 0, "User {user:?} is root");
    assert_eq!(config["config"]["Entrypoint"], serde_json::json!([format!("/{BINARY}")]));
    assert_eq!(config["os"], "linux");
    assert_eq!(config["config"]["Labels"]["org.opencontainers.image.version"], env!("CARGO_PKG_VERSION"));
}

#[test]
fn the_same_binary_gives_the_same_digest() {
    let first = image().digest();
    let again = Layout::build("again: the binary is up to date");
    assert_eq!(again.digest(), first);
}

#[test]
fn pushed_image_holds_a_static_binary_that_runs_as_the_configured_user() {
    let layout = image();
    let registry = Registry::start().unwrap();
    let reference = format!("{}/kubewasm:test", registry.host());
    crane(&["push", &layout.dir.display().to_string(), &reference, "--insecure"]);
    let pushed = String::from_utf8(crane(&["digest", &reference, "--insecure"])).unwrap();
    assert_eq!(pushed.trim(), layout.digest(), "the registry holds the layout's manifest");

    let files = tar_files(&crane(&["export", &reference, "-", "--insecure"]));
    let find = |path: &str| files.iter().find(|f| f.path == path).unwrap_or_else(|| panic!("no {path} in the image"));

    let binary = find(BINARY);
    assert!(binary.mode & 0o111 != 0, "{BINARY} is not executable: {:o}", binary.mode);
    assert!(!has_interpreter(&binary.data), "{BINARY} asks for a dynamic loader (PT_INTERP): not static");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubewasm");
    std::fs::write(&path, &binary.data).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    // Nothing from this machine's environment: the container has none of it.
    let out = Command::new(&path).arg("--version").env_clear().current_dir(dir.path()).output().unwrap();
    assert!(out.status.success(), "kubewasm --version: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), format!("kubewasm {}", env!("CARGO_PKG_VERSION")));

    let ca_bundle = &find("etc/ssl/certs/ca-certificates.crt").data;
    assert!(ca_bundle.starts_with(b"-----BEGIN CERTIFICATE-----"), "a CA bundle for TLS to registries");
    let user = layout.config()["config"]["User"].as_str().unwrap().to_owned();
    let uid = user.split(':').next().unwrap();
    let passwd = String::from_utf8(find("etc/passwd").data.clone()).unwrap();
    assert!(passwd.lines().any(|l| l.split(':').nth(2) == Some(uid)), "the user {uid} has an /etc/passwd entry: {passwd}");
}

#[test]
fn the_static_check_tells_a_dynamic_binary() {
    // This test binary is linked against the system's glibc.
    assert!(has_interpreter(&std::fs::read("/proc/self/exe").unwrap()));
}

/// Whether a 64-bit little-endian ELF executable names a program interpreter (the dynamic loader
/// of a dynamically linked binary). Without one the kernel maps the file alone: it is static.
fn has_interpreter(elf: &[u8]) -> bool {
    const PT_INTERP: u32 = 3;
    assert!(elf.len() > 64 && elf.starts_with(b"\x7fELF\x02\x01"), "not a 64-bit little-endian ELF file");
    let u16_at = |at: usize| u16::from_le_bytes(elf[at..at + 2].try_into().unwrap()) as usize;
    let phoff = u64::from_le_bytes(elf[0x20..0x28].try_into().unwrap()) as usize;
    let (phentsize, phnum) = (u16_at(0x36), u16_at(0x38));
    (0..phnum).any(|i| {
        let at = phoff + i * phentsize;
        u32::from_le_bytes(elf[at..at + 4].try_into().unwrap()) == PT_INTERP
    })
}

struct TarFile {
    path: String,
    mode: u32,
    data: Vec<u8>,
}

/// The regular files of a tar stream (ustar, with pax `path` records), as `crane export` writes it.
fn tar_files(tar: &[u8]) -> Vec<TarFile> {
    let field = |block: &[u8], from: usize, len: usize| {
        let raw = &block[from..from + len];
        String::from_utf8_lossy(&raw[..raw.iter().position(|&b| b == 0).unwrap_or(len)]).trim().to_owned()
    };
    let octal = |block: &[u8], from: usize, len: usize| usize::from_str_radix(&field(block, from, len), 8).unwrap_or(0);
    let mut files = Vec::new();
    let mut pax_path = None;
    let mut at = 0;
    while at + 512 <= tar.len() && tar[at..at + 512].iter().any(|&b| b != 0) {
        let header = &tar[at..at + 512];
        let size = octal(header, 124, 12);
        let data = &tar[at + 512..at + 512 + size];
        let (prefix, name) = (field(header, 345, 155), field(header, 0, 100));
        let path = pax_path.take().unwrap_or(if prefix.is_empty() { name } else { format!("{prefix}/{name}") });
        match header[156] {
            b'x' => {
                let records = String::from_utf8_lossy(data);
                pax_path = records.lines().find_map(|r| r.split_once(" path=").map(|(_, p)| p.to_owned()));
            }
            b'0' | 0 => files.push(TarFile {
                path: path.trim_start_matches("./").trim_start_matches('/').to_owned(),
                mode: octal(header, 100, 8) as u32,
                data: data.to_vec(),
            }),
            _ => {}
        }
        at += 512 + size.div_ceil(512) * 512;
    }
    files
}
