//! The tenant-name rule, one for both services: the processor's tenants and the gateway's tenants and key names are
//! spelled alike, so a session's tenant is the tenant the gateway attributes its calls to.

/// Longest tenant name (it is part of Redis keys and of workspace paths).
pub const MAX_TENANT_NAME: usize = 64;

/// True for a tenant name: 1 to [`MAX_TENANT_NAME`] characters of `[A-Za-z0-9._-]`, starting with a letter or
/// digit (so never `.` or `..`, and safe as a directory name and inside a Redis key).
pub fn valid_tenant_name(name: &str) -> bool {
    name.len() <= MAX_TENANT_NAME
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}
