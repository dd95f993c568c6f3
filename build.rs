//! Generates include/tiledzarr.h from src/ffi with cbindgen. The header is
//! committed; it is rewritten only when its content changes, and the test
//! script fails when the committed copy is stale.
//!
//! It also compiles the GPU kernels (kernels/*.cu) with nvcc into fatbins
//! (SASS for sm_75 to sm_120, plus PTX) that the library embeds, and sets
//! `cfg(tz_kernels)`. Without nvcc the build still succeeds: the GPU backend
//! then reports that the library was built without its CUDA kernels. With
//! `TZ_KERNEL_CACHE` set to a folder, the fatbins are kept there for the
//! next build of the same sources with the same nvcc (another profile,
//! target or set of features), which then copies them instead.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The kernel sources, each compiled into `<name>.fatbin` in OUT_DIR.
const KERNELS: [&str; 5] = ["scatter", "aggregate", "blosc", "downsample", "order"];

/// Real architectures to carry SASS for; the last also gets PTX.
const ARCHS: [u32; 7] = [75, 80, 86, 89, 90, 100, 120];

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    println!("cargo:rerun-if-changed=src/ffi");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    println!("cargo:rerun-if-changed=Cargo.toml");
    generate_header(&root);
    compile_kernels(&root);
}

/// nvcc from NVCC, CUDA_PATH / CUDA_HOME, PATH, then /usr/local/cuda.
fn find_nvcc() -> Option<PathBuf> {
    for var in ["NVCC", "CUDA_PATH", "CUDA_HOME"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    if let Some(p) = std::env::var_os("NVCC") {
        return Some(PathBuf::from(p));
    }
    for var in ["CUDA_PATH", "CUDA_HOME"] {
        if let Some(dir) = std::env::var_os(var) {
            let p = Path::new(&dir).join("bin/nvcc");
            if p.exists() {
                return Some(p);
            }
        }
    }
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("nvcc"))
        .find(|p| p.exists());
    on_path.or_else(|| Some(PathBuf::from("/usr/local/cuda/bin/nvcc")).filter(|p| p.exists()))
}

fn compile_kernels(root: &Path) {
    println!("cargo::rustc-check-cfg=cfg(tz_kernels)");
    println!("cargo:rerun-if-changed=kernels");
    println!("cargo:rerun-if-env-changed={KERNEL_CACHE}");
    let Some(nvcc) = find_nvcc() else {
        println!("cargo:warning=nvcc not found: building without CUDA kernels (the GPU backend will be unavailable)");
        return;
    };
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let commands: Vec<(&str, Command)> = KERNELS
        .into_iter()
        .map(|name| (name, nvcc_command(&nvcc, root, &out, name)))
        .collect();
    let cache = std::env::var_os(KERNEL_CACHE).map(|dir| {
        let key = cache_key(&nvcc, root, &out, &commands);
        let entry = PathBuf::from(dir).join(format!("{:016x}", fnv1a(key.as_bytes())));
        (key, entry)
    });
    if let Some((key, entry)) = &cache {
        if copy_cached(key, entry, &out) {
            println!("cargo:rustc-cfg=tz_kernels");
            return;
        }
    }
    // The kernels at once: each nvcc compiles one file for every
    // architecture, on one core.
    let running: Vec<_> = commands
        .into_iter()
        .map(|(name, mut cmd)| {
            let child = cmd
                .spawn()
                .unwrap_or_else(|e| panic!("cannot run {}: {e}", nvcc.display()));
            (name, cmd, child)
        })
        .collect();
    for (name, cmd, mut child) in running {
        match child.wait() {
            Ok(s) if s.success() => {}
            Ok(s) => panic!("nvcc failed ({s}) compiling kernels/{name}.cu: {cmd:?}"),
            Err(e) => panic!("waiting for nvcc on kernels/{name}.cu: {e}"),
        }
    }
    if let Some((key, entry)) = &cache {
        fill_cache(key, entry, &out);
    }
    println!("cargo:rustc-cfg=tz_kernels");
}

/// nvcc compiling `kernels/<name>.cu` into `<out>/<name>.fatbin`.
fn nvcc_command(nvcc: &Path, root: &Path, out: &Path, name: &str) -> Command {
    let last = ARCHS[ARCHS.len() - 1];
    let mut cmd = Command::new(nvcc);
    cmd.arg("--fatbin")
        .arg("-O3")
        .arg("-I")
        .arg(root.join("kernels"));
    for arch in ARCHS {
        let code = if arch == last {
            format!("[sm_{arch},compute_{arch}]")
        } else {
            format!("sm_{arch}")
        };
        cmd.arg("-gencode")
            .arg(format!("arch=compute_{arch},code={code}"));
    }
    cmd.arg("-o").arg(out.join(format!("{name}.fatbin")));
    cmd.arg(root.join(format!("kernels/{name}.cu")));
    cmd
}

/// A folder (from this variable) that keeps the compiled kernels for the
/// next build with the same sources, nvcc and flags, whatever its profile,
/// target or features: the test script builds the crate for clippy, the
/// release, the Python wheel and Windows, and nvcc took minutes of each.
const KERNEL_CACHE: &str = "TZ_KERNEL_CACHE";

/// Everything the fatbins depend on, as text: nvcc and its version, each
/// command's arguments (the output folder `out` aside) and every file in
/// kernels/.
fn cache_key(nvcc: &Path, root: &Path, out: &Path, commands: &[(&str, Command)]) -> String {
    let version = Command::new(nvcc)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let mut key = format!("{}\n{version}\n", nvcc.display());
    for (name, cmd) in commands {
        let args: Vec<_> = cmd.get_args().map(|a| a.to_string_lossy()).collect();
        let args = args.join(" ").replace(&*out.to_string_lossy(), "OUT");
        key += &format!("{name}: {args}\n");
    }
    let mut files: Vec<_> = std::fs::read_dir(root.join("kernels"))
        .expect("kernels/ is readable")
        .map(|e| e.expect("kernels/ is readable").path())
        .collect();
    files.sort();
    for f in files {
        let text = std::fs::read(&f).expect("a kernel source is readable");
        key += &format!("{} {:016x} {}\n", f.display(), fnv1a(&text), text.len());
    }
    key
}

/// 64-bit FNV-1a: names a cache entry; the entry keeps its whole key, so a
/// collision is a miss, never the wrong kernels.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Copies the cached fatbins into `out` when `entry` holds them for `key`.
fn copy_cached(key: &str, entry: &Path, out: &Path) -> bool {
    if std::fs::read_to_string(entry.join("key")).ok().as_deref() != Some(key) {
        return false;
    }
    KERNELS.into_iter().all(|name| {
        let file = format!("{name}.fatbin");
        std::fs::copy(entry.join(&file), out.join(&file)).is_ok()
    })
}

/// Puts the fatbins in `out` into the cache as `entry`, whole or not at
/// all (a folder of its own, renamed into place), best effort: a cache
/// that cannot be written costs the next build its time only.
fn fill_cache(key: &str, entry: &Path, out: &Path) {
    let staging = entry.with_extension(format!("tmp{}", std::process::id()));
    let filled = (|| -> std::io::Result<()> {
        std::fs::create_dir_all(&staging)?;
        for name in KERNELS {
            let file = format!("{name}.fatbin");
            std::fs::copy(out.join(&file), staging.join(&file))?;
        }
        std::fs::write(staging.join("key"), key)?;
        let _ = std::fs::remove_dir_all(entry);
        std::fs::rename(&staging, entry)
    })();
    if let Err(e) = filled {
        let _ = std::fs::remove_dir_all(&staging);
        println!(
            "cargo:warning=compiled kernels not cached in {}: {e}",
            entry.display()
        );
    }
}

/// Programs built against the header fill the `tz_image` they were
/// compiled with: `tz_image_init` keeps writing 0.4's struct for programs
/// built before it grew.
const IMAGE_INIT_MACRO: &str = "/**
 * Programs built against this header fill the tz_image they were compiled
 * with, whatever its size: tz_image_init(&image) is
 * tz_image_init_sized(&image, sizeof image). The function tz_image_init
 * itself, which programs built against 0.4 to 0.7 call, keeps writing
 * 0.4's struct. (Through an FFI, call tz_image_init_sized with the size of
 * the struct you declare.)
 */
#define tz_image_init(image) tz_image_init_sized((image), sizeof *(image))

";

fn generate_header(root: &std::path::Path) {
    let mut config =
        cbindgen::Config::from_file(root.join("cbindgen.toml")).expect("cbindgen.toml is readable");
    let version = |k: &str| std::env::var(k).unwrap();
    config.after_includes = Some(format!(
        "\n#define TZ_VERSION_MAJOR {}\n#define TZ_VERSION_MINOR {}\n#define TZ_VERSION_PATCH {}\n\n/** An open stream (opaque). */\ntypedef struct tz_stream tz_stream;\n",
        version("CARGO_PKG_VERSION_MAJOR"),
        version("CARGO_PKG_VERSION_MINOR"),
        version("CARGO_PKG_VERSION_PATCH"),
    ));
    let bindings = match cbindgen::generate_with_config(root, config) {
        Ok(b) => b,
        Err(e) => {
            // A parse error in the crate is reported by rustc itself.
            println!("cargo:warning=header not regenerated: {e}");
            return;
        }
    };
    let mut text = Vec::new();
    bindings.write(&mut text);
    // The macro must follow the function it names, inside the include
    // guard (cbindgen's trailer lands after it).
    let guard_end = b"#endif  /* TILEDZARR_H */";
    if let Some(at) = text.windows(guard_end.len()).rposition(|w| w == guard_end) {
        text.splice(at..at, IMAGE_INIT_MACRO.bytes());
    }
    let path = root.join("include/tiledzarr.h");
    if std::fs::read(&path).ok().as_deref() != Some(&text[..]) {
        std::fs::create_dir_all(root.join("include")).unwrap();
        std::fs::write(&path, text).expect("include/tiledzarr.h is writable");
    }
}
