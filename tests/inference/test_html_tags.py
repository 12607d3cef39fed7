"""HTML read into flows and written back, and inline tags carried through given alignments: the
placement rule of transformer.inference.html_tags case by case, repairs of malformed markup, and
well-formed output for any alignment."""

from __future__ import annotations

import random

import pytest

from helpers import html_balance, html_text
from transformer.errors import InputError
from transformer.inference.html_parse import Flow, parse_html, start_tag, tokenize
from transformer.inference.html_tags import project

DOCUMENTS = [
    "<!DOCTYPE html>\n<html lang='en'><head><title>A &amp; B</title></head><body>\r\n"
    "<p class=x>A &copy B &#169; <b >bold</b ><br/>x<script>if (a<b) {}</script><!-- c --></p>",
    "<p>un<i>closed <!-- unterminated",
    "plain text only\n",
    "<b><i>x</b>y</i> </p> stray &unknown; &#xZZ;",
    "",
]


@pytest.mark.parametrize("document", DOCUMENTS)
def test_tokens_join_to_the_document(document):
    assert "".join(t.raw for t in tokenize(document)) == document


def _flow(document: str) -> tuple[Flow, list]:
    doc = parse_html(document)
    flows = [p for p in doc.parts if isinstance(p, Flow) and p.has_words]
    assert len(flows) == 1
    return flows[0], doc.elements


def _shown(document: str, translation: str, pairs):
    flow, elements = _flow(document)
    return project(flow, elements, translation, pairs, open_tag=lambda t: t.raw,
                   unit_markup=lambda u: "".join(t.raw for t in u.tokens))


def test_a_tag_goes_to_the_aligned_word():
    out = _shown("A <b>black</b> dog runs.", "Ein schwarzer Hund rennt.", [(0, 0), (1, 1), (2, 2), (3, 3)])
    assert out.markup == "Ein <b>schwarzer</b> Hund rennt."
    assert (out.split, out.empty) == (0, 0)
    assert out.placements == [(0, (1,), (1,))]


def test_a_tag_follows_a_reordered_word():
    out = _shown('the <i class="c">red</i> car', "la voiture rouge", [(0, 0), (2, 1), (1, 2)])
    assert out.markup == 'la voiture <i class="c">rouge</i>'


def test_a_tag_is_widened_over_the_words_between_its_own():
    out = _shown("<b>big red</b> car", "voiture grande et rouge", [(2, 0), (0, 1), (2, 2), (1, 3)])
    assert out.markup == "voiture <b>grande et rouge</b>"
    assert out.split == 0


def test_a_tag_is_split_around_another_elements_word():
    out = _shown("<b>a</b> <i>b</i> c", "x y z", [(0, 0), (1, 1), (0, 2)])
    assert out.markup == "<b>x</b> <i>y</i> <b>z</b>"
    assert out.split == 1


def test_a_word_without_alignment_keeps_its_tag_at_the_nearest_aligned_word():
    out = _shown("one <b>two</b> three", "eins drei", [(0, 0), (2, 1)])
    assert out.markup == "<b>eins</b> drei"  # the earlier of two neighbours at the same distance
    out = _shown("one <b>two</b> three four", "eins vier", [(0, 0), (3, 1)])
    assert out.markup == "<b>eins</b> vier"
    out = _shown("one two <b>three</b> four", "eins vier", [(0, 0), (3, 1)])
    assert out.markup == "eins <b>vier</b>"


def test_nested_tags_stay_nested_when_their_words_swap():
    out = _shown("<strong>a <em>b</em></strong> c", "B A C", [(1, 0), (0, 1), (2, 2)])
    assert out.markup == "<strong><em>B</em> A</strong> C"


def test_units_follow_the_word_before_them_and_keep_their_spaces():
    out = _shown("see <code>x &lt; 1</code> now", "jetzt sieh", [(1, 0), (0, 1)])
    assert out.markup == "jetzt sieh <code>x &lt; 1</code>"
    out = _shown('<img src="a.png"> A dog', "Ein Hund", [(0, 0), (1, 1)])
    assert out.markup == '<img src="a.png"> Ein Hund'
    out = _shown("A dog<br>runs", "Ein Hund rennt", [(0, 0), (1, 1), (2, 2)])
    assert out.markup == "Ein Hund<br>rennt"


def test_an_element_without_words_is_written_where_it_stood():
    out = _shown('A <i class="icon"></i> dog', "Ein Hund", [(0, 0), (1, 1)])
    assert out.markup == 'Ein <i class="icon"></i> Hund'


def test_whitespace_around_the_text_and_escapes_inside_it():
    out = _shown("\n  A <b>dog</b>\n", "Fish & <chips>", [(0, 0), (1, 1)])
    assert out.markup == "\n  Fish <b>&amp;</b> &lt;chips&gt;\n"


def test_a_tag_inside_a_word_goes_to_the_whole_target_word():
    out = _shown("an un<b>happy</b> dog", "ein trauriger Hund", [(0, 0), (1, 1), (2, 2)])
    assert out.markup == "ein <b>trauriger</b> Hund"


@pytest.mark.parametrize("seed", range(40))
def test_any_alignment_gives_well_formed_markup_that_keeps_every_element(seed):
    rng = random.Random(seed)
    document = ('A <b>big <i>red</i> and <u>old</u></b> <a href="/x">car <code>c</code> on</a> '
                'the <span class="s">road <sup>1</sup></span> today')
    flow, elements = _flow(document)
    words = len(flow.text.split())
    target = [f"w{j}" for j in range(rng.randint(0, 12))]
    pairs = [(rng.randrange(words), j) for j in range(len(target)) if rng.random() < 0.9]
    out = project(flow, elements, " ".join(target), pairs, open_tag=lambda t: t.raw,
                  unit_markup=lambda u: "".join(t.raw for t in u.tokens))
    assert html_balance(out.markup) == []
    for name in ("b", "i", "u", "a", "code", "span", "sup"):
        assert f"<{name}" in out.markup
    assert out.markup.count("<code>c</code>") == 1
    assert [w for w in html_text(out.markup, blocks=frozenset()).split() if w != "c"] == target


def test_an_end_tag_closes_what_was_opened_inside_it_and_a_stray_one_is_dropped():
    out = _shown("<b><i>x</b>y</i> z", "X Y Z", [(0, 0), (0, 1), (1, 2)])
    assert html_balance(out.markup) == []
    assert "<i>" in out.markup and out.markup.count("</i>") == out.markup.count("<i>")


def test_an_element_left_open_is_closed_at_the_end():
    out = _shown("Hello <b>world", "Hallo Welt", [(0, 0), (1, 1)])
    assert out.markup == "Hallo <b>Welt</b>"


def test_an_inline_element_around_a_block_passes_as_a_block():
    doc = parse_html('<a href="/"><div>Card</div></a>')
    written = "".join(p.raw if not isinstance(p, Flow) else p.text for p in doc.parts)
    assert written == '<a href="/"><div>Card</div></a>'
    assert doc.elements == []


def test_units_and_raw_blocks_are_kept_whole():
    doc = parse_html('<p>A <code>x<b>y</b></code> b</p><pre>keep <b>this</b></pre>'
                     '<div translate="no">no <i>way</i></div><p class="notranslate">nor this</p>')
    flows = [p for p in doc.parts if isinstance(p, Flow)]
    assert [f.text for f in flows] == ["A  b"]
    assert "".join(t.raw for t in flows[0].units[0].tokens) == "<code>x<b>y</b></code>"
    raws = "".join(p.raw for p in doc.parts if not isinstance(p, Flow))
    assert "<pre>keep <b>this</b></pre>" in raws and '<div translate="no">no <i>way</i></div>' in raws
    assert '<p class="notranslate">nor this</p>' in raws


def test_a_document_with_control_characters_is_refused_naming_the_field():
    with pytest.raises(InputError, match=r"^texts\[2\]: not an HTML document \(control character U\+0000"):
        parse_html("<p>a\x00b</p>", field="texts[2]")


def test_start_tags_are_rebuilt_only_when_an_attribute_changes():
    (token,) = [t for t in tokenize("<img  SRC=a.png alt='A dog' lang=en-GB data-x>") if t.kind == "void"]
    assert start_tag(token, {}) == token.raw
    assert start_tag(token, {}, lang=("fr", "de")) == token.raw
    assert start_tag(token, {"alt": 'Ein "Hund"'}, lang=("en", "de")) == \
        '<img src="a.png" alt="Ein &quot;Hund&quot;" lang="de" data-x>'
