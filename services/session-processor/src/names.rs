//! The names callers and operators choose, each with its one rule: config, the API's validation and the
//! workspace layout all check a tenant name here (the rule itself is `service_kit::names`', shared with the
//! gateway, whose tenants are the processor's).

pub use service_kit::names::{MAX_TENANT_NAME, valid_tenant_name};
