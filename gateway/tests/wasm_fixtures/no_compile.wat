;; Does not validate: the function promises an i32 and returns nothing.
(module
  (memory (export "memory") 1)
  (func (export "proxy_on_context_create") (param i32 i32) (result i32)))
