//! The import rule of `lib.rs`, checked: its numbered lines are the one source, and every module of
//! the crate may name only modules on lines below its own. Test code is exempt (a unit test may use
//! an offline harness from above), so `mod tests` blocks and `tests.rs` files are not read.

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};

    /// The rule's lines: module name → line number.
    fn layers(lib: &str) -> BTreeMap<String, usize> {
        let rule = lib.split("//! ## Import rule").nth(1).expect("lib.rs has an \"Import rule\" section");
        let mut layers = BTreeMap::new();
        for line in rule.lines().skip(1).map_while(|line| line.strip_prefix("//!")) {
            let Some((number, names)) = line.trim().split_once(". ") else { continue };
            let Ok(number) = number.parse::<usize>() else { continue };
            for name in names.split(',') {
                let previous = layers.insert(name.trim().to_string(), number);
                assert!(previous.is_none(), "{} is placed twice by the import rule", name.trim());
            }
        }
        layers
    }

    /// The top-level modules `lib.rs` declares, test-only ones left out.
    fn modules(lib: &str) -> Vec<String> {
        let mut modules = Vec::new();
        let mut test_only = false;
        for line in lib.lines().map(str::trim) {
            let declared = line.strip_prefix("pub mod ").or(line.strip_prefix("mod ")).and_then(|rest| rest.strip_suffix(';'));
            if let Some(name) = declared.filter(|_| !test_only) {
                modules.push(name.to_string());
            }
            test_only = line == "#[cfg(test)]";
        }
        modules
    }

    fn sources(path: &Path, found: &mut Vec<PathBuf>) {
        if path.is_dir() {
            for entry in std::fs::read_dir(path).unwrap() {
                sources(&entry.unwrap().path(), found);
            }
        } else if path.is_file() && path.extension().is_some_and(|ext| ext == "rs") && path.file_name().is_some_and(|name| name != "tests.rs") {
            found.push(path.to_path_buf());
        }
    }

    /// The crate modules a source file names outside comments and its test module.
    fn named(source: &str, modules: &[String]) -> Vec<String> {
        let code = source.split("#[cfg(test)]\nmod tests").next().unwrap_or_default();
        let mut named = Vec::new();
        for line in code.lines().filter(|line| !line.trim_start().starts_with("//")) {
            for (at, _) in line.match_indices("crate::") {
                let rest = &line[at + "crate::".len()..];
                let mut candidates: Vec<&str> = Vec::new();
                if let Some(group) = rest.strip_prefix('{') {
                    let group = group.split('}').next().unwrap_or_default();
                    candidates.extend(group.split(',').map(|item| item.trim().split("::").next().unwrap_or_default()));
                } else {
                    candidates.push(rest.split(|c: char| !(c.is_alphanumeric() || c == '_')).next().unwrap_or_default());
                }
                named.extend(candidates.into_iter().filter(|name| modules.iter().any(|module| module == name)).map(str::to_string));
            }
        }
        named
    }

    #[test]
    fn every_module_names_only_modules_below_its_own_line() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
        let layers = layers(&lib);
        let modules = modules(&lib);
        let unplaced: Vec<_> = modules.iter().filter(|module| !layers.contains_key(*module)).collect();
        assert!(unplaced.is_empty(), "lib.rs's import rule places no line for {unplaced:?}");
        let mut upward = Vec::new();
        for module in &modules {
            let mut files = Vec::new();
            sources(&src.join(module), &mut files);
            sources(&src.join(format!("{module}.rs")), &mut files);
            for file in files {
                let text = std::fs::read_to_string(&file).unwrap();
                for other in named(&text, &modules) {
                    if other != *module && layers[&other] <= layers[module] {
                        upward.push(format!("{} names {other} (line {} of the rule, not below {module}'s {})", file.display(), layers[&other], layers[module]));
                    }
                }
            }
        }
        upward.sort();
        upward.dedup();
        assert!(upward.is_empty(), "imports against lib.rs's import rule:\n{}", upward.join("\n"));
    }
}
