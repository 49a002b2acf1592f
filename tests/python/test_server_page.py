"""The web page at "/" in headless Chromium (Debian's chromium + chromium-driver through selenium):
it loads the policies, streams a completion, and draws the tokens x layers heatmap of what the
policy decided. The screenshot is kept as a test artifact (TS_ARTIFACTS, default build/test-artifacts)."""
import os
import shutil

import pytest

from conftest import ROOT, find_model
from server_process import Server

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.chrome.options import Options  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

ARTIFACTS = pytest.importorskip("pathlib").Path(os.environ.get("TS_ARTIFACTS", ROOT / "build" / "test-artifacts"))


def chromium():
    browser, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not browser or not driver:
        pytest.skip("Debian's chromium and chromium-driver are not installed")
    opts = Options()
    opts.binary_location = browser
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1400,1000"):
        opts.add_argument(arg)
    # The system driver, so selenium never tries to download one.
    return webdriver.Chrome(service=Service(executable_path=driver), options=opts)


@pytest.mark.runtime(5)
def test_page_streams_and_draws_heatmap(ts_bin):
    policy = "orthorank:layers=1-3,ratio=0.5"
    with Server(ts_bin, find_model("stories260K.gguf"), "--policy", policy) as server:
        browser = chromium()
        try:
            browser.get(server.url + "/")
            wait = WebDriverWait(browser, 30)
            # The default policy arrives from /v1/policies as a preselected row.
            wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "#policies .policy input"))
            row = browser.find_element(By.CSS_SELECTOR, "#policies .policy")
            assert row.find_element(By.TAG_NAME, "select").get_attribute("value") == "orthorank"
            assert row.find_element(By.TAG_NAME, "input").get_attribute("value") == "layers=1-3,ratio=0.5"
            prompt = browser.find_element(By.ID, "prompt")
            prompt.clear()
            prompt.send_keys("Once upon a time")
            browser.find_element(By.ID, "run").click()
            wait.until(lambda b: b.find_element(By.ID, "status").text.startswith("done"))
            wait.until(lambda b: b.execute_script("return document.getElementById('heatmap').width") > 0)
            output = browser.find_element(By.ID, "output").text
            summary = browser.find_element(By.ID, "summary").text
            grid = browser.execute_script("const d = document.getElementById('heatmap').decisions;"
                                          "return [d.flags.length, d.tokens.length, d.policies];")
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            browser.save_screenshot(str(ARTIFACTS / "server_page.png"))
            # The scores view: OrthoRank reports its orthogonality scores on the three layers it acts on.
            Select(browser.find_element(By.ID, "view")).select_by_value("scores")
            scores_legend = browser.find_element(By.ID, "legend").text
        finally:
            browser.quit()
        assert server.stop() == 0
    assert output.startswith("Once upon a time") and len(output) > len("Once upon a time") + 20
    assert policy in summary and "FFN ran for" in summary
    assert grid[0] == 5 and grid[1] > 5 and grid[2] == [policy]
    assert "(3 layers reported)" in scores_legend
    assert (ARTIFACTS / "server_page.png").stat().st_size > 10_000
