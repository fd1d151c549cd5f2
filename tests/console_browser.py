"""A headless Chromium (Debian's `chromium` and `chromium-driver`) driven by Selenium, as the
console's tests and `make console-shots` use it: no downloaded browser, no WebDriver manager.

Waits are polls with a deadline on what the page shows (Selenium's WebDriverWait), never
sleeps: the console refreshes its live parts every interval and the test waits for the
text it expects, or fails with what the page showed last.
"""

from __future__ import annotations

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


# Chromium's own word for a stale element: the node was found, then the live part that held
# it was replaced before its text was read ("unknown error: unhandled inspector error").
SWAPPED_NODE = "does not belong to the document"


def _swapped(exc: BaseException) -> bool:
    return SWAPPED_NODE in str(exc)


class Browser:
    def __init__(self, base_url: str, width: int = 1400, height: int = 1000):
        self.base_url = base_url.rstrip("/")
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                    "--disable-gpu", f"--window-size={width},{height}"):
            options.add_argument(arg)
        self.driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))

    def close(self) -> None:
        self.driver.quit()

    def open(self, path: str) -> None:
        self.driver.get(self.base_url + path)

    def text(self, css: str) -> str:
        return self.driver.find_element(By.CSS_SELECTOR, css).text

    def attr(self, css: str, name: str) -> str | None:
        return self.driver.find_element(By.CSS_SELECTOR, css).get_attribute(name)

    def all_text(self, css: str) -> list[str]:
        return [e.text for e in self.driver.find_elements(By.CSS_SELECTOR, css)]

    def wait(self, predicate, timeout_s: float, what: str):
        """Poll predicate(browser) until truthy (answered) or fail naming `what` and the
        page's main text."""
        def check(_driver):
            try:
                return predicate(self)
            except (StaleElementReferenceException, LookupError, ValueError):
                return False          # the live part was swapped under us: ask again
            except Exception as exc:  # noqa: BLE001 - an element not there yet
                if type(exc).__name__ == "NoSuchElementException" or _swapped(exc):
                    return False
                raise
        try:
            return WebDriverWait(self.driver, timeout_s, poll_frequency=0.2).until(check)
        except TimeoutException:
            main = self.driver.find_elements(By.CSS_SELECTOR, "main")
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}; page "
                                 f"{self.driver.current_url} shows: "
                                 f"{main[0].text[:1500] if main else '(nothing)'}") from None

    def fill(self, css: str, value: str) -> None:
        e = self.driver.find_element(By.CSS_SELECTOR, css)
        e.clear()
        e.send_keys(value)

    def click(self, css: str) -> None:
        self.driver.find_element(By.CSS_SELECTOR, css).click()

    def select(self, css: str, value: str) -> None:
        from selenium.webdriver.support.ui import Select
        Select(self.driver.find_element(By.CSS_SELECTOR, css)).select_by_visible_text(value)

    def page_bytes(self) -> int:
        """What the page loaded: its resources' transfer sizes plus the document's."""
        return int(self.driver.execute_script(
            "const n = performance.getEntriesByType('navigation')[0];"
            "let total = n ? (n.transferSize || n.encodedBodySize || 0) : 0;"
            "for (const r of performance.getEntriesByType('resource'))"
            "  total += (r.transferSize || r.encodedBodySize || 0);"
            "return total;"))

    def screenshot(self, path: str) -> None:
        self.driver.save_screenshot(path)
