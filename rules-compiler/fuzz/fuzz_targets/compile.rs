#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(failure) = docstore_rules_fuzz::check_compile(data) {
        panic!("{failure}");
    }
});
