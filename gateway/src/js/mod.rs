//! The JS middleware host (`driver: "otto"`, `"goja"` or `"javascript"`).

use std::sync::Arc;

use crate::config::{ApiSpec, LoadError};
use crate::middleware::{ChainFactory, HostOptions};

/// Loads an API's JS middleware. Not implemented yet.
pub fn load(spec: &ApiSpec, _opts: &HostOptions) -> Result<Arc<dyn ChainFactory>, LoadError> {
    Err(LoadError::new(
        &spec.file,
        "custom_middleware.driver",
        "driver \"otto\" is not supported yet",
    ))
}
