//! A WASI command component: valid WebAssembly, but not a kubewasm controller.
fn main() {
    println!("I am a command, not a controller");
}
