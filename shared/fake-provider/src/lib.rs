//! fake-provider
