from infra.text import clip


def test_a_value_that_fits_is_whole_and_a_longer_one_is_cut_to_the_width_marked():
    assert clip("mitochondria", 12) == "mitochondria"
    assert clip("mitochondria", 8) == "mitocho…" and len(clip("mitochondria", 8)) == 8
    assert clip("", 3) == ""
