from pathlib import Path

import pytest

from allot.client.stack import parse_nodes, read_cluster
from allot.services.node.app import parse_islands

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cluster.toml"


def test_nvlink_islands_are_read_from_ranges() -> None:
    assert parse_islands("0-3,4-7", 8) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert parse_islands("0-1,2,3", 4) == [[0, 1], [2], [3]]
    assert parse_islands(None, 4) == [[0, 1, 2, 3]]


@pytest.mark.parametrize(("text", "words"), [("0-8", "0..7"), ("0-3,3-5", "two islands")])
def test_bad_islands_are_refused(text: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        parse_islands(text, 8)


def test_the_example_cluster_file() -> None:
    nodes = read_cluster(EXAMPLE)
    assert [(n.node_id, n.gpus, n.labels["rack"]) for n in nodes] == [
        ("a100-1", 8, "r1"),
        ("a100-2", 8, "r1"),
        ("h100-1", 8, "r2"),
    ]
    assert nodes[0].nvlink_islands == "0-3,4-7"


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ('[[nodes]]\nnode_id = "a"\ngpus = "eight"', "node 1"),
        ('[[nodes]]\nnode_id = "a"\ngpus = 8\ncolour = "red"', "colour"),
        ('[[nodes]]\nnode_id = "a"\ngpus = 8\n[[nodes]]\nnode_id = "a"\ngpus = 4', "twice"),
        ('[[nodes]]\nnode_id = "a b"\ngpus = 8', "node_id"),
        ("", r"no \[\[nodes\]\]"),
    ],
)
def test_a_bad_cluster_file_names_the_node(tmp_path: Path, content: str, words: str) -> None:
    (tmp_path / "c.toml").write_text(content)
    with pytest.raises(ValueError, match=words):
        read_cluster(tmp_path / "c.toml")


def test_nodes_from_the_shorthand_get_racks_of_four() -> None:
    racks = [n.labels["rack"] for n in parse_nodes("6x8")]
    assert racks == ["r1", "r1", "r1", "r1", "r2", "r2"]
