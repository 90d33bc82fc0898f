#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(failure) = docstore_sidecar_http_fuzz::check_matcher_wire(data) {
        panic!("{failure}");
    }
});
