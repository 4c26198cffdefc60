//! A private `redis-server` for the fault tests: the Redis kit the tests share with `procbench` (`bench::redis_kit`).

pub use bench::redis_kit::RedisServer;
