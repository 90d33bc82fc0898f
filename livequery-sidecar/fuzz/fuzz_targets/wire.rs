#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(failure) = docstore_sidecar_fuzz::check_wire(data) {
        panic!("{failure}");
    }
});
