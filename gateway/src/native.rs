//! The native plugin host (`driver: "goplugin"` or `"native"`).

use std::sync::Arc;

use crate::config::{ApiSpec, LoadError};
use crate::middleware::{ChainFactory, HostOptions};

/// Loads an API's native middleware. Not implemented yet.
pub fn load(spec: &ApiSpec, _opts: &HostOptions) -> Result<Arc<dyn ChainFactory>, LoadError> {
    Err(LoadError::new(
        &spec.file,
        "custom_middleware.driver",
        "driver \"goplugin\" is not supported yet",
    ))
}
