use super::*;

fn response(code: &str, message: &str) -> http::Response<()> {
    let mut r = http::Response::new(());
    r.headers_mut()
        .insert("grpc-status", HeaderValue::from_str(code).unwrap());
    r.headers_mut()
        .insert("grpc-message", HeaderValue::from_str(message).unwrap());
    r
}

fn code(r: &http::Response<()>) -> &str {
    r.headers()["grpc-status"].to_str().unwrap()
}

#[test]
fn refusals_before_the_handler_become_the_callers_mistake() {
    let r = rewrite(response(
        "11",
        "Error,%20decoded%20message%20length%20too%20large:%20found%209%20bytes",
    ));
    assert_eq!(code(&r), "8");
    let r = rewrite(response(
        "13",
        "failed%20to%20decode%20Protobuf%20message:%20invalid%20string",
    ));
    assert_eq!(code(&r), "3");
    for (c, m) in [("13", "storage%20broke"), ("11", "other"), ("5", "x")] {
        assert_eq!(code(&rewrite(response(c, m))), c);
    }
}
