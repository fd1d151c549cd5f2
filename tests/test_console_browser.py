"""tests/console_browser.py's waits: a node the console's live refresh swapped out between
finding it and reading it is asked again (Chromium says so with an "unhandled inspector
error", not Selenium's StaleElementReferenceException); any other error still fails."""

from __future__ import annotations

import pytest
from selenium.common.exceptions import WebDriverException

from tests.console_browser import Browser

pytestmark = pytest.mark.unit

SWAPPED = ('unknown error: unhandled inspector error: {"code":-32000,"message":"Node with '
           'given id does not belong to the document"}')


def browser() -> Browser:
    b = Browser.__new__(Browser)       # no Chromium: the wait never touches the driver
    b.driver = object()
    return b


def test_a_node_swapped_under_the_read_is_asked_again():
    seen = []

    def predicate(_b):
        seen.append(1)
        if len(seen) == 1:
            raise WebDriverException(SWAPPED)
        return "text"
    assert browser().wait(predicate, 5, "the text") == "text" and len(seen) == 2


def test_another_driver_error_still_fails_the_wait():
    def predicate(_b):
        raise WebDriverException("chrome not reachable")
    with pytest.raises(WebDriverException):
        browser().wait(predicate, 5, "the text")
