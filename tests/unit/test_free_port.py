"""Ports picked for servers of one process must differ: the kernel's choice for ``bind(0)``
repeats itself after a few hundred picks (one port in two of a ~28,000-port range), and a
stack picks several ports in a row (client, websocket, routes, dashboard), so a repeat
would start two listeners on one port and the second would exit."""

from allot.bus.server import free_port


def test_a_process_never_gets_the_same_free_port_twice_in_a_row_of_a_thousand() -> None:
    ports = [free_port() for _ in range(1000)]
    assert len(set(ports)) == len(ports), sorted(p for p in ports if ports.count(p) > 1)
