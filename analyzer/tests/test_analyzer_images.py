"""images.py: the process images of a recording, from its header, `p exec` records and the `i`
records after them; which image an event belongs to; the report's row and tags."""

from __future__ import annotations

from memdump_analyzer.images import (
    Image,
    header_tail,
    image_of,
    images_of,
    json_section,
    text_row,
    text_tag,
)


def _images() -> list[Image]:
    """dash (events 1-39), exec at 40 of env (41-49, breakpoints), exec at 50 of prog (51-99)."""
    info = {"program": "/usr/bin/dash", "recorder": "in-process"}
    later = [(40, "recorder", "breakpoints"), (50, "recorder", "in-process")]
    return images_of(info, later, [(40, "/usr/bin/env"), (50, "/src/prog")], 99)


def test_images_from_execs_and_their_info() -> None:
    assert _images() == [
        Image(1, "/usr/bin/dash", "in-process", 1, 39),
        Image(2, "/usr/bin/env", "breakpoints", 41, 49),
        Image(3, "/src/prog", "in-process", 51, 99),
    ]


def test_an_image_whose_recorder_is_not_said() -> None:
    images = images_of({"program": "/bin/sh"}, [(9, "recorder", "x")], [(5, "/a"), (8, "/b")], 8)
    assert [(i.program, i.recorder, i.first_seq, i.last_seq) for i in images] == [
        ("/bin/sh", None, 1, 4), ("/a", None, 6, 7), ("/b", "x", 9, 8)]
    assert text_row(images, str).endswith("3. /b (no events, x recorder)")


def test_the_image_of_an_event() -> None:
    images = _images()
    assert [image_of(images, seq).number for seq in (1, 39, 40, 41, 50, 51, 99)] == \
        [1, 1, 1, 2, 2, 3, 3]


def test_one_image_adds_nothing() -> None:
    images = images_of({"program": "/src/prog"}, [], [], 10)
    assert (text_row(images, str), text_tag(images, 3, str), json_section(images),
            header_tail(images, str)) == (None, "", {}, "")


def test_text_and_json() -> None:
    images = _images()
    assert header_tail(images, str) == ", which executed /src/prog"
    assert text_tag(images, None, str) == ", in image 3 (prog)"
    assert text_tag(images, 45, str) == ", in image 2 (env)"
    assert text_row(images, str) == (
        "1. /usr/bin/dash (events 1 to 39, in-process recorder); 2. /usr/bin/env (events 41 to "
        "49, breakpoints recorder); 3. /src/prog (events 51 to 99, in-process recorder)")
    assert json_section(images)["images"][1] == {
        "image": 2, "program": "/usr/bin/env", "recorder": "breakpoints", "first_seq": 41,
        "last_seq": 49}
