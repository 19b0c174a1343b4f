//! Hostile plugins no SDK would build: WAT core modules that lay out what they return by hand
//! (the canonical ABI lets any number of list entries point at the same bytes), wrapped as
//! components of the controller contract with `wit-component`, and components that nest many
//! core instances beside a plugin (`wasm-encoder`, `wasmparser`). Each returns a valid manifest, so that it
//! loads, and attacks in one place:
//!
//! - [`map_related_alias`]: `map-related` returns `keys` keys whose names all point at one
//!   buffer of `name_bytes`;
//! - [`describe_alias`]: the manifest's one permission lists `namespaces` namespaces that all
//!   point at one buffer of `name_bytes`;
//! - [`table_bomb`]: beside the plugin, `instances` core instances of a module with `tables`
//!   tables of `elements` function references each, filled by its start function.

use std::fmt::Write as _;

use crate::guests::workspace_root;

/// Where the static data starts (the manifest, its strings, the result areas).
const DATA: u32 = 1024;
/// Where the bump allocator the host lowers arguments with starts; reset after every call.
const HEAP: u32 = 64 << 10;
/// Where the attacks' lists and buffers start.
const BIG: u32 = 1 << 20;
const PAGE: u32 = 64 << 10;

/// What the plugin's manifest says: a primary of ConfigMaps selected by `selector`, and (for
/// `map-related` attacks) a watch of every ConfigMap mapped by `map-related`.
#[derive(Debug, Clone)]
pub struct Manifest {
    pub name: String,
    pub selector: String,
    pub map_related: bool,
}

impl Manifest {
    pub fn new(name: &str, selector: &str) -> Self {
        Manifest { name: name.into(), selector: selector.into(), map_related: false }
    }
}

/// Static data laid out from [`DATA`] on, little-endian, as the canonical ABI reads it.
struct Data(Vec<u8>);

impl Data {
    fn at(&self) -> u32 {
        DATA + self.0.len() as u32
    }
    fn align(&mut self, to: usize) {
        while !self.0.len().is_multiple_of(to) {
            self.0.push(0);
        }
    }
    fn bytes(&mut self, bytes: &[u8]) -> (u32, u32) {
        let at = self.at();
        self.0.extend_from_slice(bytes);
        (at, bytes.len() as u32)
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn zeros(&mut self, n: usize) {
        self.0.resize(self.0.len() + n, 0);
    }
    fn string(&mut self, (ptr, len): (u32, u32)) {
        self.u32(ptr);
        self.u32(len);
    }
    fn gvk(&mut self, gvk: [(u32, u32); 3]) {
        gvk.into_iter().for_each(|s| self.string(s));
    }
    /// `option<string>`: a discriminant, padding, the string.
    fn some_string(&mut self, s: (u32, u32)) {
        self.u32(1);
        self.string(s);
    }
    fn none_string(&mut self) {
        self.zeros(12);
    }
    fn wat(&self) -> String {
        let mut text = String::new();
        for b in &self.0 {
            write!(text, "\\{b:02x}").unwrap();
        }
        format!("(data (i32.const {DATA}) \"{text}\")")
    }
}

/// The manifest's layout: where `describe`'s result is, and where the one permission's
/// namespaces list (pointer, length) is, for [`describe_alias`] to point at its buffer.
struct Laid {
    data: Data,
    describe_result: u32,
    namespaces_list: u32,
    /// `result<action, error>` = `ok(done)`.
    done: u32,
    /// Where `map-related` writes (pointer, length) of the list it returns.
    keys_result: u32,
}

fn lay_out(manifest: &Manifest) -> Laid {
    let mut d = Data(Vec::new());
    let name = d.bytes(manifest.name.as_bytes());
    let version = d.bytes(b"1.0.0");
    let (empty, v1, configmap) = (d.bytes(b""), d.bytes(b"v1"), d.bytes(b"ConfigMap"));
    let selector = d.bytes(manifest.selector.as_bytes());
    // One watch: ConfigMaps, mapped by map-related, no selector.
    d.align(4);
    let watch = d.at();
    d.gvk([empty, v1, configmap]);
    d.u32(2); // mapping: map-related
    d.zeros(8);
    d.none_string();
    // One permission: get and list ConfigMaps (namespaces patched by describe_alias).
    let verbs = d.bytes(&[0, 1]);
    d.align(4);
    let permission = d.at();
    d.gvk([empty, v1, configmap]);
    d.none_string();
    d.string(verbs);
    let namespaces_list = d.at();
    d.string((0, 0));
    // result<manifest, string>: ok, then the manifest at offset 8 (its limits hold a u64).
    d.align(8);
    let describe_result = d.at();
    d.u32(0);
    d.u32(0);
    d.string(name);
    d.string(version);
    d.gvk([empty, v1, configmap]);
    d.some_string(selector);
    d.string((0, 0)); // owns
    d.string(if manifest.map_related { (watch, 1) } else { (0, 0) });
    d.none_string(); // finalizer
    d.zeros(8); // resync-seconds: none
    d.u32(1); // max-concurrency
    d.zeros(4);
    d.zeros(24); // limits: none, none
    d.string((permission, 1));
    d.align(8);
    let done = d.at();
    d.zeros(32);
    let keys_result = d.at();
    d.zeros(8);
    assert!(d.at() < HEAP, "the static data fits below the heap");
    Laid { data: d, describe_result, namespaces_list, done, keys_result }
}

/// A loop storing the pointer and length of one buffer into `count` entries of `stride` bytes
/// from `list` (at `offset` within each entry).
fn alias_loop(list: u32, count: u32, stride: u32, offset: u32, buffer: u32, len: u32) -> String {
    format!(
        "(local.set $p (i32.const {list}))
         (local.set $i (i32.const 0))
         (block $done (loop $next
           (br_if $done (i32.ge_u (local.get $i) (i32.const {count})))
           (i32.store offset={offset} (local.get $p) (i32.const {buffer}))
           (i32.store offset={} (local.get $p) (i32.const {len}))
           (local.set $p (i32.add (local.get $p) (i32.const {stride})))
           (local.set $i (i32.add (local.get $i) (i32.const 1)))
           (br $next)))",
        offset + 4
    )
}

/// The core module: memory of `pages`, a bump allocator, and the exports of `plugin` and
/// `reconciler`, `describe` and `map-related` running `describe_body` and `map_body` first.
fn module(laid: &Laid, pages: u32, describe_body: &str, map_body: &str) -> String {
    let request = "(param i32 i32 i32 i32 i32 i32 i32 i32) (result i32)";
    let reset = format!("(global.set $heap (i32.const {HEAP}))");
    let done = laid.done;
    let version = contract_version();
    format!(
        r#"(module
  (memory (export "memory") {pages})
  (global $heap (mut i32) (i32.const {HEAP}))
  (func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32)
    (local $p i32)
    (local.set $p (i32.and (i32.add (global.get $heap) (i32.const 7)) (i32.const -8)))
    (global.set $heap (i32.add (local.get $p) (local.get 3)))
    (if (i32.gt_u (global.get $heap) (i32.const {BIG})) (then unreachable))
    (local.get $p))
  {data}
  (func (export "kubewasm:controller/plugin@{version}#describe") (param i32 i32) (result i32)
    (local $i i32) (local $p i32)
    {describe_body} {reset} (i32.const {describe}))
  (func (export "kubewasm:controller/reconciler@{version}#reconcile") {request} {reset} (i32.const {done}))
  (func (export "kubewasm:controller/reconciler@{version}#finalize") {request} {reset} (i32.const {done}))
  (func (export "kubewasm:controller/reconciler@{version}#map-related") {request}
    (local $i i32) (local $p i32)
    {map_body} {reset} (i32.const {keys})))"#,
        data = laid.data.wat(),
        describe = laid.describe_result,
        keys = laid.keys_result,
    )
}

/// Wraps a core module (WAT) as a component exporting `plugin` and `reconciler` of the contract
/// in `wit/`.
fn component(wat: &str) -> Vec<u8> {
    let mut module = wat::parse_str(wat).unwrap_or_else(|e| panic!("{e}\n{wat}"));
    let mut resolve = wit_parser::Resolve::default();
    resolve.push_dir(workspace_root().join("wit")).expect("the contract parses");
    let version = contract_version();
    let world = format!(
        "package test:hostile;\nworld hostile {{\n  export kubewasm:controller/plugin@{version};\n  export kubewasm:controller/reconciler@{version};\n}}\n"
    );
    let hostile = resolve.push_str("hostile.wit", &world).expect("the test world parses");
    let world = resolve.select_world(&[hostile], Some("hostile")).expect("the test world");
    wit_component::embed_component_metadata(&mut module, &resolve, world, wit_component::StringEncoding::UTF8).expect("embedding the world");
    wit_component::ComponentEncoder::default().validate(true).module(&module).expect("a module of the world").encode().expect("a component")
}

fn pages(end: u64) -> u32 {
    u32::try_from(end.div_ceil(u64::from(PAGE))).expect("fits in 32-bit memory")
}

/// A plugin whose `map-related` returns `keys` keys whose names all point at one buffer of
/// `name_bytes` (zero bytes: valid UTF-8). Its memory holds the list and the buffer once.
pub fn map_related_alias(manifest: &Manifest, keys: u32, name_bytes: u32) -> Vec<u8> {
    let manifest = Manifest { map_related: true, ..manifest.clone() };
    let laid = lay_out(&manifest);
    let buffer = BIG + keys * 20;
    let fill = alias_loop(BIG, keys, 20, 12, buffer, name_bytes);
    let map = format!(
        "{fill} (i32.store (i32.const {r}) (i32.const {BIG})) (i32.store (i32.const {}) (i32.const {keys}))",
        laid.keys_result + 4,
        r = laid.keys_result
    );
    component(&module(&laid, pages(u64::from(buffer) + u64::from(name_bytes)), "", &map))
}

/// A plugin whose manifest's one permission lists `namespaces` namespaces that all point at one
/// buffer of `name_bytes`.
pub fn describe_alias(manifest: &Manifest, namespaces: u32, name_bytes: u32) -> Vec<u8> {
    let laid = lay_out(manifest);
    let buffer = BIG + namespaces * 8;
    let fill = alias_loop(BIG, namespaces, 8, 0, buffer, name_bytes);
    let describe = format!(
        "{fill} (i32.store (i32.const {l}) (i32.const {BIG})) (i32.store (i32.const {}) (i32.const {namespaces}))",
        laid.namespaces_list + 4,
        l = laid.namespaces_list
    );
    component(&module(&laid, pages(u64::from(buffer) + u64::from(name_bytes)), &describe, ""))
}

/// A well-behaved plugin of this kind (valid manifest, `reconcile` answers `done`), for tests
/// that attack beside it.
pub fn plain(manifest: &Manifest) -> Vec<u8> {
    let laid = lay_out(manifest);
    component(&module(&laid, pages(u64::from(BIG)), "", ""))
}

/// [`plain`] beside `instances` core instances of a module with `tables` tables of `elements`
/// function references, each filled by the module's start function: the plugin's store holds
/// them all, and instantiating it (to describe it) fills them.
pub fn table_bomb(manifest: &Manifest, instances: u32, tables: u32, elements: u32) -> Vec<u8> {
    use wasm_encoder::{Component, ComponentAliasSection, ComponentExportKind, ComponentExportSection, ComponentInstanceSection};
    use wasm_encoder::{ComponentSectionId, InstanceSection, ModuleArg, RawSection};
    let plugin = plain(manifest);
    let mut bomb = String::from("(module\n");
    for t in 0..tables {
        writeln!(bomb, "  (table $t{t} {elements} funcref)").unwrap();
    }
    bomb.push_str("  (func $fill\n");
    for t in 0..tables {
        writeln!(bomb, "    (table.fill $t{t} (i32.const 0) (ref.null func) (i32.const {elements}))").unwrap();
    }
    bomb.push_str("  )\n  (start $fill))\n");
    let bomb = wat::parse_str(&bomb).expect("the bomb parses");

    // The plugin imports the contract's `types` (its type definitions): the outer component
    // begins with the plugin's own type and import sections, so that it imports the same and
    // hands it on.
    let mut outer = Component::new();
    let mut imports = Vec::new();
    for payload in wasmparser::Parser::new(0).parse_all(&plugin) {
        match payload.expect("the plugin parses") {
            wasmparser::Payload::Version { .. } => {}
            wasmparser::Payload::ComponentTypeSection(s) => {
                outer.section(&RawSection { id: ComponentSectionId::Type as u8, data: &plugin[s.range()] });
            }
            wasmparser::Payload::ComponentImportSection(s) => {
                outer.section(&RawSection { id: ComponentSectionId::Import as u8, data: &plugin[s.range()] });
                imports.extend(s.into_iter().map(|import| import.expect("an import").name.name.to_string()));
            }
            _ => break,
        }
    }
    outer.section(&RawSection { id: ComponentSectionId::CoreModule as u8, data: &bomb });
    let mut core = InstanceSection::new();
    for _ in 0..instances {
        core.instantiate(0, Vec::<(&str, ModuleArg)>::new());
    }
    outer.section(&core);
    outer.section(&RawSection { id: ComponentSectionId::Component as u8, data: &plugin });
    // Instances so far: the imports (0..), then the plugin.
    let mut instance = ComponentInstanceSection::new();
    let args: Vec<(&str, ComponentExportKind, u32)> =
        imports.iter().enumerate().map(|(i, name)| (name.as_str(), ComponentExportKind::Instance, i as u32)).collect();
    instance.instantiate(0, args);
    outer.section(&instance);
    let plugin_instance = imports.len() as u32;
    let version = contract_version();
    let mut aliases = ComponentAliasSection::new();
    let mut exports = ComponentExportSection::new();
    for (i, interface) in ["plugin", "reconciler"].into_iter().enumerate() {
        let name = format!("kubewasm:controller/{interface}@{version}");
        aliases.alias(wasm_encoder::Alias::InstanceExport { instance: plugin_instance, kind: ComponentExportKind::Instance, name: &name });
        exports.export(&name, ComponentExportKind::Instance, plugin_instance + 1 + i as u32, None);
    }
    outer.section(&aliases);
    outer.section(&exports);
    outer.finish()
}

/// The version of the contract in `wit/`.
fn contract_version() -> String {
    let mut resolve = wit_parser::Resolve::default();
    let (contract, _) = resolve.push_dir(workspace_root().join("wit")).expect("the contract parses");
    resolve.packages[contract].name.version.as_ref().expect("a versioned contract").to_string()
}
