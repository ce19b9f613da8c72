;; Exports proxy_on_request_headers as a global, not a function: the host
;; would take it as absent and never run the headers phase.
(module
  (memory (export "memory") 1)
  (func (export "malloc") (param i32) (result i32) (i32.const 1024))
  (func (export "proxy_abi_version_0_2_1"))
  (func (export "proxy_on_context_create") (param i32 i32))
  (global (export "proxy_on_request_headers") i32 (i32.const 0)))
