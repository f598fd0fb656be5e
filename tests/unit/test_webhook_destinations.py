"""Which addresses webhooks may reach (``convergence.services.webhook_destinations``), as a
table: every refused kind of IPv4 and IPv6 address with its reason, their IPv4-mapped and NAT64
forms, the numeric forms a resolver reads as IPv4, and the operator's allowed networks. No
packet is sent: these are the policy's answers.
"""

from __future__ import annotations

import ipaddress

import pytest

from convergence.services import webhook_destinations as wd
from convergence.services.webhook_client import DestinationNotAllowed, GuardedBackend
from convergence.services.webhook_destinations import Destinations
from convergence.settings import Settings, load_settings

REFUSED = [
    ("127.0.0.1", wd.LOOPBACK), ("127.255.255.254", wd.LOOPBACK),
    ("0.0.0.0", wd.UNSPECIFIED), ("0.1.2.3", wd.UNSPECIFIED),
    ("10.0.0.1", wd.PRIVATE), ("172.16.0.1", wd.PRIVATE), ("172.31.255.255", wd.PRIVATE),
    ("192.168.1.1", wd.PRIVATE), ("100.64.0.1", wd.SHARED),
    ("169.254.169.254", wd.LINK_LOCAL), ("192.0.0.8", wd.RESERVED),
    ("192.0.2.1", wd.DOCUMENTATION), ("198.51.100.1", wd.DOCUMENTATION),
    ("203.0.113.1", wd.DOCUMENTATION), ("192.88.99.1", wd.RESERVED),
    ("198.18.0.1", wd.BENCHMARKING), ("198.19.255.255", wd.BENCHMARKING),
    ("224.0.0.1", wd.MULTICAST), ("233.252.0.1", wd.MULTICAST), ("239.255.255.250", wd.MULTICAST),
    ("240.0.0.1", wd.RESERVED), ("255.255.255.255", wd.RESERVED),
    ("::", wd.UNSPECIFIED), ("::1", wd.LOOPBACK), ("fc00::1", wd.PRIVATE),
    ("fd12:3456::1", wd.PRIVATE), ("fe80::1", wd.LINK_LOCAL), ("fe80::1%eth0", wd.LINK_LOCAL),
    ("fec0::1", wd.PRIVATE), ("ff02::1", wd.MULTICAST), ("ff0e::1", wd.MULTICAST),
    ("100::1", wd.RESERVED), ("::7f00:1", wd.RESERVED),  # discard-only; IPv4-compatible
    ("2001::1", wd.RESERVED), ("2001:2::1", wd.RESERVED),  # Teredo; benchmarking
    ("2001:db8::1", wd.DOCUMENTATION), ("3fff::1", wd.DOCUMENTATION),
    ("2002:7f00:1::1", wd.RESERVED),  # 6to4 of 127.0.0.1
    # An IPv6 form of an IPv4 address is judged as that address.
    ("::ffff:127.0.0.1", wd.LOOPBACK), ("::ffff:169.254.169.254", wd.LINK_LOCAL),
    ("::ffff:10.0.0.1", wd.PRIVATE), ("::ffff:0.0.0.0", wd.UNSPECIFIED),
    ("64:ff9b::127.0.0.1", wd.LOOPBACK), ("64:ff9b::a9fe:a9fe", wd.LINK_LOCAL),
]
REACHABLE = ["8.8.8.8", "1.1.1.1", "93.184.216.34", "2606:4700:4700::1111",
             "2a00:1450:4001:80b::200e", "::ffff:8.8.8.8", "64:ff9b::808:808"]


@pytest.mark.parametrize(("text", "why"), REFUSED)
def test_refused_addresses_and_why(text: str, why: str) -> None:
    assert wd.refusal(ipaddress.ip_address(text)) == why
    assert Destinations().refusal(ipaddress.ip_address(text)) == why


@pytest.mark.parametrize("text", REACHABLE)
def test_global_addresses_are_reachable(text: str) -> None:
    assert wd.refusal(ipaddress.ip_address(text)) is None


@pytest.mark.parametrize(("host", "address"), [
    ("127.0.0.1", "127.0.0.1"), ("[::1]", "::1"), ("::1", "::1"),
    ("127.1", "127.0.0.1"), ("0x7f.1", "127.0.0.1"), ("2130706433", "127.0.0.1"),
    ("0177.0.0.1", "127.0.0.1"), ("[::ffff:7f00:1]", "::ffff:127.0.0.1"),
    ("example.com", None), ("localhost", None), ("cafe.be", None), ("deadbeef", None),
])
def test_ip_literals_are_recognised_in_every_form(host: str, address: str | None) -> None:
    assert wd.literal(host) == (None if address is None else ipaddress.ip_address(address))


def test_allowed_networks_let_their_addresses_through_and_no_others() -> None:
    trusted = Destinations.from_settings(Settings(
        database_url="sqlite://", webhook_allowed_networks=("127.0.0.0/8", "fd00:1::/32")))
    for text in ("127.0.0.1", "127.9.9.9", "::ffff:127.0.0.1", "64:ff9b::7f00:1",
                 "fd00:1::5"):
        assert trusted.refusal(ipaddress.ip_address(text)) is None, text
    for text in ("::1", "10.0.0.1", "169.254.169.254", "fd00:2::5"):
        assert trusted.refusal(ipaddress.ip_address(text)) is not None, text
    assert trusted.host_refusal("127.0.0.1") is None
    assert trusted.host_refusal("hooks.example.com") is None  # names are checked on connect
    refused = trusted.host_refusal("[::1]")
    assert refused is not None and refused[1] == wd.LOOPBACK


def test_the_setting_is_read_checked_and_normalized() -> None:
    env = {"CONVERGENCE_DATABASE_URL": "sqlite://"}
    assert load_settings(env).webhook_allowed_networks == ()
    assert load_settings(env).max_subscriptions_per_tenant == 100
    loaded = load_settings({**env, "CONVERGENCE_WEBHOOK_ALLOWED_NETWORKS": "10.1.2.3/8, ::1",
                            "CONVERGENCE_MAX_SUBSCRIPTIONS_PER_TENANT": "7"})
    assert loaded.webhook_allowed_networks == ("10.0.0.0/8", "::1/128")
    assert loaded.max_subscriptions_per_tenant == 7
    with pytest.raises(ValueError, match="CONVERGENCE_WEBHOOK_ALLOWED_NETWORKS"):
        load_settings({**env, "CONVERGENCE_WEBHOOK_ALLOWED_NETWORKS": "10.0.0.0/33"})


def test_a_name_connects_only_to_the_addresses_that_pass() -> None:
    """What a name resolves to is checked at connection: refused addresses are dropped, and a
    name with none left is refused (nothing is connected to here)."""
    answers = {"mixed.example.test": ["10.0.0.1", "127.0.0.1", "169.254.169.254"],
               "inside.example.test": ["10.0.0.1", "::1"]}
    backend = GuardedBackend(Destinations(wd.networks(["127.0.0.0/8"])),
                             lambda host, port: answers[host])
    assert [str(a) for a in backend.addresses("mixed.example.test", 80)] == ["127.0.0.1"]
    with pytest.raises(DestinationNotAllowed):
        backend.addresses("inside.example.test", 80)
    with pytest.raises(DestinationNotAllowed):
        backend.addresses("169.254.169.254", 80)  # a literal is not resolved, only checked
