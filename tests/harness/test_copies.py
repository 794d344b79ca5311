from collections import OrderedDict

from harness.copies import plain_copy


def test_a_plain_copy_shares_no_container_with_the_original() -> None:
    original = {"a": [1, [2, 3], {"b": [4]}], "c": {"d": {"e": 5.0}}, "f": None}
    copied = plain_copy(original)
    assert copied == original
    copied["a"][1].append(9)
    copied["a"][2]["b"].append(9)
    copied["c"]["d"]["e"] = 0
    assert original == {"a": [1, [2, 3], {"b": [4]}], "c": {"d": {"e": 5.0}}, "f": None}


def test_other_kinds_are_deep_copied_as_they_are() -> None:
    inner = [1, 2]
    original = {"ordered": OrderedDict(x=inner), "pair": (inner, 3)}
    copied = plain_copy(original)
    assert type(copied["ordered"]) is OrderedDict and type(copied["pair"]) is tuple
    assert copied == original
    inner.append(3)
    assert copied["ordered"]["x"] == [1, 2] and copied["pair"][0] == [1, 2]
