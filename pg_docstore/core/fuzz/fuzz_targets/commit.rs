#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(failure) = docstore_core_fuzz::check_commit(data) {
        panic!("{failure}");
    }
});
