#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| opforge_fuzz::text_format(data));
