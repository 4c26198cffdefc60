use super::*;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::Filter;

fn hint(directives: &str) -> Option<LevelFilter> {
    Filter::<Registry>::max_level_hint(&log_filter::<Registry>(EnvFilter::new(directives)))
}

#[test]
fn the_log_filter_keeps_the_log_levels_hint() {
    assert_eq!(hint("info"), Some(LevelFilter::INFO));
    assert_eq!(hint("warn"), Some(LevelFilter::WARN));
    assert_eq!(hint("info,h2=debug"), Some(LevelFilter::DEBUG));
    assert_eq!(hint("trace"), Some(LevelFilter::TRACE));
}

#[test]
fn once_installed_the_process_wide_level_is_the_logs() {
    let expected = EnvFilter::try_from_default_env()
        .ok()
        .and_then(|f| Filter::<Registry>::max_level_hint(&f))
        .unwrap_or(LevelFilter::INFO);
    let _telemetry = init("llm-telemetry-test").expect("the subscriber installs");
    assert_eq!(LevelFilter::current(), expected);
}
