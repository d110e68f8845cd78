"""Records to rows: what a payload holds, and what it never holds."""

from __future__ import annotations

import json

import pytest

from aklab.core import EventMessage
from aklab.secrets import FOLDING_TO_ASCII, register_secret
from aklab.store import _codec, decode, encode, new_team_id
from aklab.store._codec import scrub
from tests.store.test_contract import MANAGER, sent, usage


def test_a_payload_is_json_with_the_class_of_each_object() -> None:
    row = encode(sent("hello", "ask1"), "team")
    payload = json.loads(row.payload)
    assert payload["type"] == "aklab.core._messages.SentMessage"
    assert payload["fields"]["message"]["$type"] == "aklab.agent.messages.AgentMessage"
    assert (row.kind, row.event_type, row.sender, row.recipient, row.ask_id) == (
        "SentMessage",
        None,
        "@Human",
        "@Manager",
        "ask1",
    )
    assert row.created_at.tzinfo is not None
    assert encode(usage(), "team").event_type == "LlmUsageEvent"


def test_a_notice_to_the_human_is_read_back_as_a_notice() -> None:
    from aklab.agent import Notice
    from aklab.core import SentMessage
    from tests.store.test_contract import HUMAN

    notice = Notice(content="@Manager could not answer: cannot reach the model server", sender=MANAGER, recipient=HUMAN)
    row = encode(SentMessage(sender=MANAGER, recipient=HUMAN, message=notice), "team")
    back = decode(json.loads(row.payload))
    assert isinstance(back, SentMessage) and isinstance(back.message, Notice)
    assert (back.message.type, back.message.content) == ("notification", notice.content)


def test_a_clean_payload_is_stored_as_the_full_scrub_would_store_it() -> None:
    for record in (sent("plain words, no secret"), usage(input_tokens=3)):
        row = encode(record, "team")
        assert json.loads(row.payload) == scrub(json.loads(row.payload))


def test_nan_becomes_null_and_credential_keys_lose_their_value() -> None:
    key = "sk-codec-" + new_team_id()
    register_secret(key)
    record = EventMessage(
        sender=MANAGER,
        event={"cost": float("nan"), "nested": {"api_key": "plain-unregistered", "token": "abc"}, "k": [key]},
    )
    payload = json.loads(encode(record, "team").payload)
    event = payload["fields"]["event"]
    assert event == {"cost": None, "nested": {"api_key": "[redacted]", "token": "[redacted]"}, "k": ["[redacted]"]}
    assert decode(payload).event == event  # type: ignore[attr-defined]


def test_rows_never_import_modules_outside_aklab() -> None:
    payload = json.loads(encode(usage(), "team").payload)
    payload["fields"]["event"]["$type"] = "antigravity.Fly"  # a module that does something on import
    event = decode(payload)
    assert isinstance(event, EventMessage) and isinstance(event.event, dict)
    import sys

    assert "antigravity" not in sys.modules


@pytest.mark.parametrize(
    "text",
    [
        '{"token":"x"}',
        '{"Access_Token":"x"}',
        '{"input_tokens":3,"output_tokens":4}',  # not a credential key
        '{"proxy-authorization":"x"}',
        '{"x-goog-api-key":"x"}',
        '{"apikey":"x"}',
        '{"note":"the token: is a word here"}',
        '{"client-secret":"x"}',
        '{"keys":"x","secretary":"y"}',
        '{"paſſword":"x"}',  # non-ASCII: matched case-insensitively like the regex does
        '{"PASSWORD":"x","é":1}',
        '{"→":"to","Api_Key":"x"}',  # non-ASCII elsewhere: the lowered text is looked in
        '{"→":"to","note":"no key"}',
        '{"To\u212aen":"x"}',  # the Kelvin sign
        '{"authorızation":"x"}',  # dotless i
        '{"AUTHORİZATION":"x"}',  # dotted capital I
    ],
)
def test_the_fast_credential_key_check_finds_what_the_regex_finds(text: str) -> None:
    raw = text.encode()
    found = _codec._credential_key_utf8(text, raw, raw.lower())
    assert found == (_codec._CREDENTIAL_IN_JSON.search(text) is not None)


def test_every_credential_key_and_header_word_holds_a_telltale() -> None:
    """What lets a payload whose lowered bytes hold no telltale skip both checks."""
    from aklab.secrets import _HEADER_WORDS

    for word in [*_codec._CREDENTIAL_KEYS, *_HEADER_WORDS]:
        assert any(telltale in word.encode() for telltale in _codec._TELLTALES), word


@pytest.mark.parametrize(
    "text",
    [
        "Authorization: Bearer abcdefghijkl",
        "x-api-key=abcdefghijkl",
        "BEARER abcdefghijklmnop",
    ],
)
def test_a_header_in_a_payload_is_redacted_whatever_its_case(text: str) -> None:
    row = encode(sent(text), "team")
    assert "abcdefghijkl" not in row.payload and "[redacted]" in row.payload


def test_a_registered_value_is_redacted_from_a_payload_with_no_telltale(monkeypatch: pytest.MonkeyPatch) -> None:
    import aklab.secrets as secrets

    monkeypatch.setattr(secrets, "_values", secrets._values)
    monkeypatch.setattr(secrets, "_pattern", secrets._pattern)
    secrets.register_secret("sk-made-up-0123456789")
    row = encode(sent("the value sk-made-up-0123456789 in plain words"), "team")
    assert "sk-made-up-0123456789" not in row.payload and "[redacted]" in row.payload


def test_pydantic_core_writes_the_payload_in_one_call_and_odd_values_still_get_stored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    slow: list[object] = []
    plain = _codec._plain
    monkeypatch.setattr(_codec, "_plain", lambda payload: slow.append(payload) or plain(payload))
    for record in (sent("hello", "ask1"), usage(input_tokens=3)):
        fast = json.loads(encode(record, "team").payload)
        assert decode(fast).model_dump() == record.model_dump()
    assert slow == []  # the common records never take the field-by-field path

    class Unwritable:
        """A value whose own serializer fails: pydantic-core gives up on the whole payload."""

    from pydantic import BaseModel, field_serializer

    class Odd(BaseModel):
        model_config = {"arbitrary_types_allowed": True}
        thing: Unwritable

        @field_serializer("thing")
        def _thing(self, value: Unwritable) -> str:
            raise ValueError("cannot write this")

    row = encode(EventMessage(sender=MANAGER, event=Odd(thing=Unwritable())), "team")
    assert len(slow) == 1 and json.loads(row.payload)["fields"]["event"]["$data"]["$repr"].startswith("Odd(")


def test_only_four_characters_beyond_ascii_match_an_ascii_letter_case_insensitively() -> None:
    """What lets the credential check look in the lowered text of any other text: no other
    character matches an ASCII letter in a case-insensitive regex, and none lowers to one."""
    import re
    import string

    letter = re.compile("(?i)[a-z]")
    folding = {chr(cp) for cp in range(128, 0x110000) if letter.fullmatch(chr(cp))}
    assert folding == set(FOLDING_TO_ASCII)
    lowering = {chr(cp) for cp in range(128, 0x110000) if set(chr(cp).lower()) & set(string.ascii_letters)}
    assert lowering <= folding


@pytest.mark.parametrize(
    "text",
    [
        "plain words",
        "Authorization: Bearer abcdefghijkl",
        "an API_KEY=xyz in ascii",
        "→ arrows beyond Latin-1, then Api-Key: v",
        "→ arrows and no header word",
        "Api-\u212aey: v",  # the Kelvin sign lowers to k
        "AUTHORİZATION: v",  # the dotted capital I
        "beaRer token → é",
    ],
)
def test_the_byte_check_for_header_words_finds_what_the_text_check_finds(text: str) -> None:
    from aklab.secrets import _names_a_header, might_redact_utf8

    raw = text.encode()
    assert might_redact_utf8(text, raw, raw.lower()) == _names_a_header(text.lower())


def test_a_header_spelled_with_a_character_that_lowers_to_ascii_is_still_redacted_in_a_row() -> None:
    row = encode(sent("→ call it with Api-\u212aey: sk-kelvin-0123456789"), "team")
    assert "sk-kelvin-0123456789" not in row.payload and "[redacted]" in row.payload
