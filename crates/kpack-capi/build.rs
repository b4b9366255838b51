//! Gives the shared library the SONAME of the reference (`SOVERSION 0`), so programs linked
//! against it record `librocm_kpack.so.0`.
fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,librocm_kpack.so.0");
    }
}
