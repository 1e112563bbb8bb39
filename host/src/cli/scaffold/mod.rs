//! `wasmctrl new`: a guest crate that builds outside this repository — a
//! per-object controller for a custom resource with a child ConfigMap,
//! status and the host-managed finalizer, its CRD, a sample object, native
//! tests and a README; or, with `--for`, a per-object controller of a
//! built-in kind ([`builtin`]) keeping a ConfigMap per labelled object.
//! Owns the names' rules, the templates (`templates/`, filled by plain
//! placeholder replacement) and writing them into an empty directory.
//! With `--lang python` or `--lang typescript`, the same controller as a
//! Python project ([`python`]) or an npm package ([`typescript`]). Never overwrites a file, never runs cargo, never reaches
//! the network; the SDK is a `path` dependency on a directory it checks.

pub mod builtin;
mod project;
pub mod python;
pub mod typescript;

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use wasmctrl_kube_rules::names::{is_dns1123_label, is_dns1123_subdomain};

use builtin::BuiltinKind;
use project::check_package;
pub use project::{Lang, Options, Project, ScaffoldError};

impl Lang {
    /// The SDK of the source tree this binary was built from, for this
    /// language; it may not exist where the binary runs.
    pub fn source_tree_sdk(self) -> PathBuf {
        match self {
            Lang::Rust => source_tree_sdk(),
            Lang::Python => python::source_tree_sdk(),
            Lang::TypeScript => typescript::source_tree_sdk(),
        }
    }
}

/// The SDK of the source tree this binary was built from; it may not exist
/// where the binary runs.
pub fn source_tree_sdk() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit/rust/sdk")
}

/// Rust keywords and the names Cargo refuses for a package.
const RESERVED: &[&str] = &[
    "abstract",
    "alloc",
    "as",
    "async",
    "await",
    "become",
    "box",
    "break",
    "build",
    "const",
    "continue",
    "core",
    "crate",
    "deps",
    "do",
    "dyn",
    "else",
    "enum",
    "examples",
    "extern",
    "false",
    "final",
    "fn",
    "for",
    "gen",
    "if",
    "impl",
    "in",
    "incremental",
    "let",
    "loop",
    "macro",
    "match",
    "mod",
    "move",
    "mut",
    "override",
    "priv",
    "proc_macro",
    "pub",
    "ref",
    "return",
    "self",
    "static",
    "std",
    "struct",
    "super",
    "test",
    "trait",
    "true",
    "try",
    "type",
    "typeof",
    "unsafe",
    "unsized",
    "use",
    "virtual",
    "where",
    "while",
    "yield",
];

fn name_error(name: &str, reason: &str) -> ScaffoldError {
    ScaffoldError::Name {
        name: name.to_string(),
        reason: reason.to_string(),
    }
}

fn type_error(flag: &'static str, value: &str, reason: &str) -> ScaffoldError {
    ScaffoldError::Type {
        flag,
        value: value.to_string(),
        reason: reason.to_string(),
    }
}

/// Checks `name`: a DNS-1123 label (the guest's name) that starts with a
/// letter and is no Rust keyword or name Cargo reserves (the crate's).
pub fn check_name(name: &str) -> Result<(), ScaffoldError> {
    if !is_dns1123_label(name) {
        return Err(name_error(
            name,
            "a guest name is 1-63 lowercase letters, digits or '-', starting and ending with a letter or digit",
        ));
    }
    if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        return Err(name_error(name, "a crate name starts with a letter"));
    }
    if RESERVED.contains(&name.replace('-', "_").as_str()) {
        return Err(name_error(
            name,
            "it is a Rust keyword or a name Cargo reserves",
        ));
    }
    Ok(())
}

/// `my-app` → `MyApp`.
fn upper_camel(name: &str) -> String {
    name.split('-')
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_ascii_uppercase().to_string() + chars.as_str()
            })
        })
        .collect()
}

/// The lowercase plural of `kind`, as English mostly forms it (`Policy` →
/// `policies`, `Box` → `boxes`, `App` → `apps`).
pub fn plural(kind: &str) -> String {
    let lower = kind.to_ascii_lowercase();
    let consonant_y =
        lower.ends_with('y') && !lower[..lower.len() - 1].ends_with(['a', 'e', 'i', 'o', 'u']);
    if consonant_y {
        format!("{}ies", &lower[..lower.len() - 1])
    } else if lower.ends_with(['s', 'x', 'z']) || lower.ends_with("ch") || lower.ends_with("sh") {
        format!("{lower}es")
    } else {
        format!("{lower}s")
    }
}

/// The label key that opts an object of a built-in kind in for `name`.
fn opt_in_label(name: &str) -> String {
    format!("example.com/{name}")
}

impl Project {
    /// Checks `options` and the SDK directory.
    pub fn new(options: &Options) -> Result<Self, ScaffoldError> {
        check_name(&options.name)?;
        if let Some(name) = &options.builtin {
            if options.lang != Lang::Rust {
                return Err(type_error(
                    "for",
                    name,
                    "a controller of a built-in kind is scaffolded in Rust only (drop --lang)",
                ));
            }
            return Self::for_builtin(options, builtin::resolve(name)?);
        }
        let group = options.group.as_deref().unwrap_or("example.com");
        if builtin::is_builtin_group(group)? {
            return Err(type_error(
                "group",
                group,
                "a built-in API group holds no custom resources; to control a built-in kind, use --for with its plural (--for namespaces, --for deployments.apps)",
            ));
        }
        if !is_dns1123_subdomain(group) || !group.contains('.') {
            return Err(type_error(
                "group",
                group,
                "a CRD's group is a lowercase DNS subdomain with at least one dot (example.com)",
            ));
        }
        let version = options.version.as_deref().unwrap_or("v1");
        if !is_dns1123_label(version) || !version.starts_with(|c: char| c.is_ascii_lowercase()) {
            return Err(type_error(
                "version",
                version,
                "a CRD version is a lowercase DNS label starting with a letter (v1, v1beta1)",
            ));
        }
        let kind = options
            .kind
            .clone()
            .unwrap_or_else(|| upper_camel(&options.name));
        let kind_ok = kind.len() <= 60
            && kind.starts_with(|c: char| c.is_ascii_uppercase())
            && kind.chars().all(|c| c.is_ascii_alphanumeric());
        if !kind_ok {
            return Err(type_error(
                "kind",
                &kind,
                "a kind is 1-60 ASCII letters or digits, starting with an uppercase letter (Widget)",
            ));
        }
        let sdk_path = match options.lang {
            Lang::Rust => check_sdk(&options.sdk_path)?,
            Lang::Python => python::check_sdk(&options.sdk_path)?,
            Lang::TypeScript => typescript::check_sdk(&options.sdk_path)?,
        };
        Ok(Project {
            name: options.name.clone(),
            crate_name: options.name.replace('-', "_"),
            group: group.to_string(),
            version: version.to_string(),
            plural: plural(&kind),
            kind,
            namespaced: true,
            builtin: false,
            sdk_path,
            lang: options.lang,
        })
    }

    /// A controller of the built-in `kind`.
    fn for_builtin(options: &Options, kind: BuiltinKind) -> Result<Self, ScaffoldError> {
        let custom = [
            ("group", &options.group),
            ("version", &options.version),
            ("kind", &options.kind),
        ];
        if let Some((flag, Some(value))) = custom.into_iter().find(|(_, v)| v.is_some()) {
            return Err(type_error(
                flag,
                value,
                "--for names a built-in kind: --group, --version and --kind describe a custom resource",
            ));
        }
        Ok(Project {
            name: options.name.clone(),
            crate_name: options.name.replace('-', "_"),
            group: kind.group,
            version: kind.version,
            kind: kind.kind,
            plural: kind.plural,
            namespaced: kind.namespaced,
            builtin: true,
            sdk_path: check_sdk(&options.sdk_path)?,
            lang: Lang::Rust,
        })
    }

    /// The finalizer the host holds on the custom resources.
    pub fn finalizer(&self) -> String {
        format!("{}/cleanup", self.group)
    }

    /// Its objects' `apiVersion`: `group/version`, or `version` for core.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Every file of the crate: its path relative to the crate's directory
    /// and its text.
    pub fn files(&self) -> Vec<(&'static str, String)> {
        if self.lang == Lang::TypeScript {
            return typescript::files(self);
        }
        if self.lang == Lang::Python {
            return python::templates()
                .iter()
                .map(|(path, template)| (*path, self.render(template)))
                .collect();
        }
        let common = [
            ("Cargo.toml", include_str!("templates/Cargo.toml.tmpl")),
            (".gitignore", include_str!("templates/gitignore.tmpl")),
        ];
        let own: &[(&'static str, &'static str)] = if self.builtin {
            &[
                (
                    "README.md",
                    include_str!("templates/builtin-README.md.tmpl"),
                ),
                (
                    "sample.yaml",
                    include_str!("templates/builtin-sample.yaml.tmpl"),
                ),
                ("src/lib.rs", include_str!("templates/builtin-lib.rs.tmpl")),
                (
                    "src/tests.rs",
                    include_str!("templates/builtin-tests.rs.tmpl"),
                ),
            ]
        } else {
            &[
                ("README.md", include_str!("templates/README.md.tmpl")),
                ("crd.yaml", include_str!("templates/crd.yaml.tmpl")),
                ("sample.yaml", include_str!("templates/sample.yaml.tmpl")),
                ("src/lib.rs", include_str!("templates/lib.rs.tmpl")),
                ("src/tests.rs", include_str!("templates/tests.rs.tmpl")),
            ]
        };
        common
            .iter()
            .chain(own)
            .map(|(path, template)| (*path, self.render(template)))
            .collect()
    }

    /// Where a built-in kind's sample object's ConfigMap goes (namespace,
    /// name), how the guest's code names it, and how its docs say it.
    fn builtin_child(&self) -> (String, String, &'static str, &'static str) {
        const HOST_NS: &str = "wasmctrl-system";
        if self.group.is_empty() && self.kind == "Namespace" {
            (
                "sample".into(),
                "{{name}}".into(),
                "configmap_gvk().object(object.name(), GUEST_NAME)",
                "named `{{name}}` in that namespace",
            )
        } else if self.namespaced {
            (
                "default".into(),
                "sample-{{name}}".into(),
                "let name = format!(\"{}-{GUEST_NAME}\", object.name());\n    configmap_gvk().object(object.namespace(), &name)",
                "named `<name>-{{name}}` in the {{kind}}'s namespace",
            )
        } else {
            (
                HOST_NS.into(),
                "{{singular}}-sample".into(),
                "let name = format!(\"{{singular}}-{}\", object.name());\n    configmap_gvk().object(&env.namespace, &name)",
                "named `{{singular}}-<name>` in the namespace the host runs in",
            )
        }
    }

    fn render(&self, template: &str) -> String {
        // A TOML basic string: JSON's escapes are TOML's.
        let sdk = self.sdk_path.to_string_lossy();
        let sdk = serde_json::to_string(&*sdk).unwrap_or_default();
        let (child_ns, child_name, child_ref, child_where) = self.builtin_child();
        let (sample_ns, sample_key, sample_object) = if self.namespaced {
            ("default", "default/sample", "sample --namespace default")
        } else {
            ("", "sample", "sample")
        };
        let qualified = if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        };
        // Fragments and placeholders holding placeholders come first.
        let text = [
            (
                "{{readme_build}}",
                include_str!("templates/readme-build.md.tmpl"),
            ),
            (
                "{{readme_change}}",
                include_str!("templates/readme-change.md.tmpl"),
            ),
            ("{{child_code}}", child_ref),
            ("{{child_where}}", child_where),
            ("{{sample_child}}", &format!("{child_ns}/{child_name}")),
            ("{{child_namespace}}", &child_ns),
            ("{{child_name}}", &child_name),
            (
                "{{env_arg}}",
                if child_ref.contains("env.") {
                    "env"
                } else {
                    "_env"
                },
            ),
            ("{{sample_namespace}}", sample_ns),
            (
                "{{sample_namespace_line}}",
                if self.namespaced {
                    "  namespace: default\n"
                } else {
                    ""
                },
            ),
            ("{{sample_key}}", sample_key),
            ("{{sample_object}}", sample_object),
            (
                "{{key_form}}",
                if self.namespaced {
                    "`namespace/name`"
                } else {
                    "`name`"
                },
            ),
            (
                "{{scope}}",
                if self.namespaced {
                    "namespaced"
                } else {
                    "cluster-scoped"
                },
            ),
            ("{{label}}", &opt_in_label(&self.name)),
            ("{{qualified}}", &qualified),
            ("{{name}}", self.name.as_str()),
            ("{{crate}}", &self.crate_name),
            ("{{group}}", &self.group),
            ("{{version}}", &self.version),
            ("{{api_version}}", &self.api_version()),
            ("{{kind}}", &self.kind),
            ("{{plural}}", &self.plural),
            ("{{singular}}", &self.kind.to_ascii_lowercase()),
            ("{{finalizer}}", &self.finalizer()),
            ("{{sdk_path}}", &sdk),
        ]
        .into_iter()
        .fold(template.to_string(), |text, (key, value)| {
            text.replace(key, value)
        });
        python::placeholders(self)
            .iter()
            .fold(text, |text, (key, value)| text.replace(key, value))
    }

    /// Writes the crate into `dir`, which must not exist or be an empty
    /// directory; no file is ever overwritten. The files written, in order.
    pub fn write(&self, dir: &Path) -> Result<Vec<PathBuf>, ScaffoldError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| ScaffoldError::Io { path, source }
        };
        match fs::read_dir(dir) {
            Ok(mut entries) => {
                if entries.next().is_some() {
                    return Err(ScaffoldError::NotEmpty(dir.to_path_buf()));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                fs::create_dir_all(dir).map_err(io(dir))?;
            }
            Err(_) if dir.exists() => return Err(ScaffoldError::NotEmpty(dir.to_path_buf())),
            Err(e) => return Err(io(dir)(e)),
        }
        let mut written = Vec::new();
        for (relative, text) in self.files() {
            let path = dir.join(relative);
            if let Some(parent) = path.parent() {
                fs::create_dir_all(parent).map_err(io(parent))?;
            }
            fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
                .and_then(|mut f| f.write_all(text.as_bytes()))
                .map_err(io(&path))?;
            written.push(path);
        }
        Ok(written)
    }
}

/// `path`, absolute, if it is the guest SDK's crate directory.
fn check_sdk(path: &Path) -> Result<PathBuf, ScaffoldError> {
    check_package(path, "Cargo.toml", "wasmctrl-guest-sdk")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(name: &str) -> Options {
        Options {
            name: name.to_string(),
            group: None,
            version: None,
            kind: None,
            builtin: None,
            sdk_path: source_tree_sdk(),
            lang: Lang::Rust,
        }
    }

    fn for_builtin(name: &str, kind: &str) -> Options {
        Options {
            builtin: Some(kind.to_string()),
            ..options(name)
        }
    }

    fn refused(options: &Options) -> String {
        match Project::new(options) {
            Ok(p) => panic!("{:?} was accepted: {p:?}", options.name),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn defaults_derive_the_kind_and_plural_from_the_name() {
        let p = Project::new(&options("my-widget")).expect("a good name");
        assert_eq!(
            (p.crate_name.as_str(), p.group.as_str(), p.version.as_str()),
            ("my_widget", "example.com", "v1")
        );
        assert_eq!(
            (p.kind.as_str(), p.plural.as_str()),
            ("MyWidget", "mywidgets")
        );
        assert_eq!(p.finalizer(), "example.com/cleanup");
        assert!(p.sdk_path.is_absolute() && p.sdk_path.join("Cargo.toml").is_file());
        for (kind, plural_) in [
            ("Policy", "policies"),
            ("Box", "boxes"),
            ("Day", "days"),
            ("Match", "matches"),
        ] {
            assert_eq!(plural(kind), plural_);
        }
    }

    #[test]
    fn names_that_are_not_a_crate_name_and_a_dns_label_are_refused() {
        for bad in [
            "",
            "My-App",
            "my_app",
            "-app",
            "app-",
            "9lives",
            "fn",
            "test",
            "a.b",
            &"a".repeat(64),
        ] {
            let e = refused(&options(bad));
            assert!(e.contains("cannot name a guest"), "{bad:?}: {e}");
        }
        let mut o = options("ok");
        o.group = Some("nodots".into());
        assert!(refused(&o).starts_with("--group \"nodots\""));
        o.group = None;
        o.kind = Some("lower".into());
        assert!(refused(&o).starts_with("--kind \"lower\""));
        o.kind = None;
        o.version = Some("1".into());
        assert!(refused(&o).starts_with("--version \"1\""));
        o.version = None;
        o.sdk_path = PathBuf::from("/nonexistent/wit/rust/sdk");
        assert!(refused(&o).contains("no wasmctrl guest SDK at /nonexistent/wit/rust/sdk"));
    }

    #[test]
    fn every_placeholder_is_filled_and_the_sdk_is_a_toml_string() {
        let mut o = options("w");
        o.group = Some("ops.acme.io".into());
        o.kind = Some("Widget".into());
        let p = Project::new(&o).expect("good options");
        let files = p.files();
        for (path, text) in &files {
            assert!(!text.contains("{{"), "{path} keeps a placeholder");
        }
        let cargo = &files[0].1;
        let sdk = serde_json::to_string(&p.sdk_path.to_string_lossy()).expect("a string");
        assert!(
            cargo.contains(&format!("wasmctrl-guest-sdk = {{ path = {sdk} }}")),
            "{cargo}"
        );
        let lib = &files
            .iter()
            .find(|(path, _)| *path == "src/lib.rs")
            .expect("lib.rs")
            .1;
        assert!(lib.contains(r#"GroupVersionKind::new("ops.acme.io", "v1", "Widget")"#));
        assert!(lib.contains(r#"pub const PRIMARY_WATCH: &str = "widgets";"#));
    }

    #[test]
    fn the_core_or_a_built_in_group_points_at_for() {
        for group in ["", "apps", "rbac.authorization.k8s.io"] {
            let mut o = options("op");
            o.group = Some(group.into());
            let e = refused(&o);
            assert!(
                e.starts_with(&format!("--group {group:?}")) && e.contains("use --for"),
                "{e}"
            );
        }
    }

    #[test]
    fn for_a_built_in_kind_resolves_it_and_refuses_custom_resource_flags() {
        let p = Project::new(&for_builtin("ns-op", "ns")).expect("a built-in kind");
        assert_eq!(
            (p.group.as_str(), p.kind.as_str(), p.plural.as_str()),
            ("", "Namespace", "namespaces")
        );
        assert!(p.builtin && !p.namespaced);
        assert_eq!(p.api_version(), "v1");
        let p = Project::new(&for_builtin("d", "deployments.apps")).expect("a built-in kind");
        assert_eq!((p.api_version().as_str(), p.namespaced), ("apps/v1", true));
        let e = refused(&for_builtin("d", "deploymnet"));
        assert!(
            e.starts_with("--for: \"deploymnet\" is not a built-in kind")
                && e.contains("deployments.apps"),
            "{e}"
        );
        let mut o = for_builtin("d", "deployments");
        o.kind = Some("Deployment".into());
        assert!(refused(&o).starts_with("--kind \"Deployment\""));
    }

    #[test]
    fn a_built_in_kind_s_crate_has_no_crd_and_every_placeholder_filled() {
        for (kind, child, selector) in [
            (
                "namespaces",
                "object(object.name(), GUEST_NAME)",
                "example.com/op",
            ),
            (
                "services",
                "configmap_gvk().object(object.namespace(), &name)",
                "example.com/op",
            ),
            (
                "nodes",
                "format!(\"node-{}\", object.name());\n    configmap_gvk().object(&env.namespace, &name)",
                "example.com/op",
            ),
        ] {
            let p = Project::new(&for_builtin("op", kind)).expect("a built-in kind");
            let files = p.files();
            let paths: Vec<&str> = files.iter().map(|(path, _)| *path).collect();
            assert_eq!(
                paths,
                [
                    "Cargo.toml",
                    ".gitignore",
                    "README.md",
                    "sample.yaml",
                    "src/lib.rs",
                    "src/tests.rs"
                ]
            );
            for (path, text) in &files {
                assert!(!text.contains("{{"), "{kind}: {path} keeps a placeholder");
            }
            let lib = &files[4].1;
            assert!(lib.contains(child), "{kind}: {lib}");
            assert!(lib.contains(&format!("pub const LABEL: &str = \"{selector}\";")));
            assert!(!lib.contains("finalizer"), "{kind}: no finalizer");
        }
    }

    fn python(name: &str) -> Options {
        Options {
            lang: Lang::Python,
            sdk_path: Lang::Python.source_tree_sdk(),
            ..options(name)
        }
    }

    #[test]
    fn a_python_project_has_every_placeholder_filled_and_names_its_sdk() {
        let mut o = python("my-widget");
        o.group = Some("ops.acme.io".into());
        let p = Project::new(&o).expect("good options");
        let files = p.files();
        let paths: Vec<&str> = files.iter().map(|(path, _)| *path).collect();
        assert_eq!(
            paths,
            [
                "pyproject.toml",
                ".gitignore",
                "README.md",
                "crd.yaml",
                "sample.yaml",
                "app.py",
                "tests/test_app.py"
            ]
        );
        for (path, text) in &files {
            assert!(!text.contains("{{"), "{path} keeps a placeholder");
        }
        let src = p.sdk_path.join("src");
        let toml = serde_json::to_string(&src.to_string_lossy()).expect("a string");
        assert!(files[0]
            .1
            .contains(&format!("pythonpath = [\".\", {toml}]")));
        let app = &files[5].1;
        assert!(app.contains(r#"GroupVersionKind("ops.acme.io", "v1", "MyWidget")"#));
        assert!(app.contains(r#"PRIMARY_WATCH = "mywidgets""#));
        let readme = &files[2].1;
        assert!(readme.contains(&format!("-p {} app -o my_widget.wasm", src.display())));
    }

    #[test]
    fn python_needs_the_python_sdk_and_a_custom_resource() {
        let mut o = python("op");
        o.sdk_path = source_tree_sdk();
        let e = refused(&o);
        assert!(
            e.contains("no wasmctrl guest SDK at") && e.contains("pyproject.toml"),
            "{e}"
        );
        let e = refused(&Options {
            builtin: Some("namespaces".into()),
            ..python("op")
        });
        assert!(
            e.starts_with("--for \"namespaces\"") && e.contains("Rust only"),
            "{e}"
        );
    }

    #[test]
    fn writes_into_an_empty_or_new_directory_and_never_over_anything() {
        let tmp = tempfile::tempdir().expect("a temp dir");
        let p = Project::new(&options("w")).expect("good options");
        let new = tmp.path().join("new/w");
        let written = p.write(&new).expect("a new directory");
        assert_eq!(written.len(), p.files().len());
        assert!(new.join("src/lib.rs").is_file() && new.join(".gitignore").is_file());
        // Written once: not again over itself.
        let again = p.write(&new).expect_err("not empty any more").to_string();
        assert!(
            again.contains("already exists and is not an empty directory"),
            "{again}"
        );
        let empty = tmp.path().join("empty");
        fs::create_dir(&empty).expect("mkdir");
        p.write(&empty).expect("an empty directory");
        let file = tmp.path().join("file");
        fs::write(&file, "x").expect("write");
        assert!(matches!(p.write(&file), Err(ScaffoldError::NotEmpty(_))));
    }
}
