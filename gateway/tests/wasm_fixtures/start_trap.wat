;; Traps while starting (in proxy_on_vm_start): no worker could ever run it.
(module
  (memory (export "memory") 1)
  (func (export "malloc") (param i32) (result i32) (i32.const 1024))
  (func (export "proxy_abi_version_0_2_1"))
  (func (export "proxy_on_context_create") (param i32 i32))
  (func (export "proxy_on_vm_start") (param i32 i32) (result i32) unreachable))
