#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| opforge_fuzz::tensor_json(data));
