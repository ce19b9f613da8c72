;; Defines nine memories: one more than an instance may have.
(module
  (memory (export "memory") 1)
  (memory $m1 0)
  (memory $m2 0)
  (memory $m3 0)
  (memory $m4 0)
  (memory $m5 0)
  (memory $m6 0)
  (memory $m7 0)
  (memory $m8 0)
  (func (export "malloc") (param i32) (result i32) (i32.const 1024))
  (func (export "proxy_abi_version_0_2_1"))
  (func (export "proxy_on_context_create") (param i32 i32)))
