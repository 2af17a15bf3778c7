"""Endpoint parsing, API-key sourcing and redaction."""

from __future__ import annotations

import pytest

from specwatch.sources.http.endpoint import Endpoint, parse_endpoint, redact


@pytest.mark.parametrize(
    ("text", "base"),
    [
        ("localhost:8000", "http://localhost:8000"),
        ("10.0.0.5:30000", "http://10.0.0.5:30000"),
        ("  gpu-box:8080  ", "http://gpu-box:8080"),
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
        ("http://127.0.0.1:8000/", "http://127.0.0.1:8000"),
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000"),
        ("https://api.example.com", "https://api.example.com"),
        ("https://api.example.com/proxy/v1/", "https://api.example.com/proxy"),
        # an address pasted from a client's request or a browser: the endpoint goes, once
        ("http://127.0.0.1:8000/v1/completions", "http://127.0.0.1:8000"),
        ("localhost:8000/v1/chat/completions/", "http://localhost:8000"),
        ("gpu-box:8080/metrics", "http://gpu-box:8080"),
        ("https://h/proxy/v1/models", "https://h/proxy"),
        ("http://h:1/health", "http://h:1"),
        ("http://h:1/v1/v1", "http://h:1/v1"),
        ("HTTP://Host:1", "http://host:1"),
        ("[::1]:8000", "http://[::1]:8000"),
        ("https://[2001:db8::1]:8443", "https://[2001:db8::1]:8443"),
    ],
)
def test_accepted_forms(text: str, base: str) -> None:
    assert parse_endpoint(text, env={}).base_url == base


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "empty server address"),
        ("localhost", "no port"),
        ("ftp://host:21", "unsupported scheme 'ftp'"),
        ("host:notaport", "bad port"),
        ("host:99999", "bad port"),
        ("http://user:pw@host:1", "credentials in the server address"),
        ("http://host:1/?a=b", "query or fragment"),
        ("host:1?model=a&a=b", "query or fragment"),
        ("host:1?model=a&model=b", "query or fragment"),
        ("host:1?model=a#x", "query or fragment"),
        ("host:1?model=", "empty model name"),
        ("http://:8000", "no host"),
        ("local host:80", "spaces"),
        ("host:0", "port 0"),
    ],
)
def test_rejected_forms_have_one_clear_line(text: str, fragment: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_endpoint(text, env={})
    message = str(info.value)
    assert fragment in message
    assert "\n" not in message


def test_a_routers_model_is_named_in_the_address() -> None:
    routed = parse_endpoint("gpu-box:8080/v1?model=qwen3:8b", env={})
    assert (routed.base_url, routed.model) == ("http://gpu-box:8080", "qwen3:8b")
    assert parse_endpoint("gpu-box:8080", env={}).model is None
    assert parse_endpoint("h:1?model=a%20b", env={}).model == "a b"
    # a name cut or cleaned would route elsewhere: refused, in one line
    for bad in ("x" * 257, "a%0Ab", "a%1Bb"):
        with pytest.raises(ValueError, match=r"^a model name over 256 characters or with control"):
            parse_endpoint("h:1?model=" + bad, env={})


def test_credentials_never_echoed() -> None:
    with pytest.raises(ValueError) as info:
        parse_endpoint("http://user:hunter2@host:1", env={})
    assert "hunter2" not in str(info.value)


def test_key_order_argument_then_env() -> None:
    env = {"SPECWATCH_API_KEY": "sw-key", "OPENAI_API_KEY": "oa-key"}
    assert parse_endpoint("h:1", "arg-key", env=env).api_key == "arg-key"
    assert parse_endpoint("h:1", None, env=env).api_key == "sw-key"
    assert parse_endpoint("h:1", "", env=env).api_key == "sw-key"
    assert parse_endpoint("h:1", None, env={"OPENAI_API_KEY": "oa-key"}).api_key == "oa-key"
    assert parse_endpoint("h:1", None, env={"SPECWATCH_API_KEY": ""}).api_key is None
    assert parse_endpoint("h:1", None, env={}).api_key is None


def test_key_reads_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECWATCH_API_KEY", "from-env")
    assert parse_endpoint("h:1").api_key == "from-env"


def test_key_never_in_repr_or_str() -> None:
    ep = parse_endpoint("h:1", "sk-secret-123", env={})
    assert "sk-secret-123" not in repr(ep)
    assert "sk-secret-123" not in str(ep)
    assert "sk-secret-123" not in f"{ep!r} {ep!s} {ep}"
    assert ep.headers() == {"Authorization": "Bearer sk-secret-123"}
    assert Endpoint("http://h:1").headers() == {}


def test_key_with_line_break_rejected_without_echo() -> None:
    with pytest.raises(ValueError) as info:
        parse_endpoint("h:1", "abc\r\nX-Evil: 1", env={})
    assert "abc" not in str(info.value)


def test_url_joins_paths() -> None:
    ep = Endpoint("http://h:1/prefix")
    assert ep.url("/metrics") == "http://h:1/prefix/metrics"
    assert ep.url("metrics") == "http://h:1/prefix/metrics"


def test_redact_removes_key_and_secret_shapes() -> None:
    ep = Endpoint("http://h:1", "sk-live-XYZ")
    text = (
        "failed sk-live-XYZ; Authorization: Bearer other-token "
        "python -m sglang.launch_server --api-key topsecret --admin-api-key=zz-admin-val "
        '{"api_key": "k1", "hf_token": "hf_abc", "max_tokens": 256, "tokenizer_path": "t"}'
    )
    out = redact(text, ep)
    for secret in ("sk-live-XYZ", "other-token", "topsecret", "zz-admin-val", "k1", "hf_abc"):
        assert secret not in out, secret
    assert '"max_tokens": 256' in out
    assert '"tokenizer_path": "t"' in out
    assert redact("nothing to hide max_tokens=3") == "nothing to hide max_tokens=3"
