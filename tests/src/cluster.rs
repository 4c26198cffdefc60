//! Redis Cluster and Sentinel deployments on loopback for the tests: the Redis kit the tests share with `procbench`
//! (`bench::redis_kit`).

pub use bench::redis_kit::cluster::{NodeInfo, PRIMARIES, RedisCluster};
pub use bench::redis_kit::sentinels::{SENTINEL_MASTER, Sentinels};
