"""No UDP leaves a render: a page that tries STUN/TURN through WebRTC sends no datagram (issue 14).

A UDP socket on loopback stands in for an attacker's STUN server. The page builds a peer
connection with that server as its ICE server, opens a data channel and sets its local
description, answers itself through a second peer and adds a remote candidate pointing at the
socket, so both gathering (STUN, TURN) and connectivity checks (ICE) would send to it; it also
opens a WebTransport session to it. The same runs in a fresh frame, which can race the
renderer's init script. The page marks itself done when every one of the four tries has
ended (checks failed, WebRTC or WebTransport missing or refused) or after 3 s, and the render waits
for that mark: whatever reached the socket is in its buffer.
"""

from __future__ import annotations

import socket
import urllib.parse
from collections.abc import Iterator

import pytest

from tests.drills.support import DrillSite, RendererProcess

pytestmark = pytest.mark.chromium

STUN_PAGE = """<html><body><p id="state">start</p><script>
let pending = 4;  // two peer connections (page, frame) and two WebTransport sessions
function mark() {
  if (document.getElementById('done')) return;
  const m = document.createElement('div'); m.id = 'done'; m.textContent = 'done';
  document.body.append(m);  // with text: an empty div is never visible to the render's wait
}
function once(what) {
  let ended = false;
  return (why) => {
    if (ended) return;
    ended = true;
    document.getElementById('state').textContent += ' ' + what + ': ' + why;
    if (--pending === 0) mark();
  };
}
setTimeout(mark, 3000);
function attempt(win, done) {
  const PC = win.RTCPeerConnection || win.webkitRTCPeerConnection;
  if (!PC) { done('no RTCPeerConnection'); return; }
  let pc;
  try {
    pc = new PC({iceServers: [{urls: 'stun:127.0.0.1:PORT'},
                              {urls: 'turn:127.0.0.1:PORT', username: 'u', credential: 'c'}]});
  } catch (e) { done('refused: ' + e); return; }
  pc.createDataChannel('x');
  pc.oniceconnectionstatechange = () => {
    if (pc.iceConnectionState === 'failed') done('checks failed');
  };
  const peer = new PC();
  pc.createOffer().then(o => pc.setLocalDescription(o))
    .then(() => peer.setRemoteDescription(pc.localDescription))
    .then(() => peer.createAnswer()).then(a => peer.setLocalDescription(a))
    .then(() => pc.setRemoteDescription(peer.localDescription))
    .then(() => pc.addIceCandidate({
      candidate: 'candidate:1 1 udp 2122260223 127.0.0.1 PORT typ host', sdpMid: '0'
    })).catch(e => done('failed: ' + e));
}
function transport(win, done) {
  try {
    new win.WebTransport('https://127.0.0.1:PORT/').ready
      .then(() => done('open'), (e) => done('refused: ' + e));
  } catch (e) { done('absent: ' + e); }
}
attempt(window, once('page'));
transport(window, once('page transport'));
const frame = document.createElement('iframe'); document.body.append(frame);
attempt(frame.contentWindow, once('frame'));
transport(frame.contentWindow, once('frame transport'));
</script></body></html>"""


@pytest.fixture
def stun_listener() -> Iterator[socket.socket]:
    """A UDP socket on 127.0.0.1 that never answers."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.setblocking(False)
    yield sock
    sock.close()


def received(sock: socket.socket) -> list[bytes]:
    """Every datagram already waiting on `sock` (no waiting for more)."""
    got: list[bytes] = []
    while True:
        try:
            got.append(sock.recv(65536))
        except BlockingIOError:
            return got


def page_for(sock: socket.socket) -> str:
    return STUN_PAGE.replace("PORT", str(sock.getsockname()[1]))


@pytest.mark.parametrize("source", ["document", "url"])
def test_webrtc_sends_no_udp(
    renderer: RendererProcess, site: DrillSite, stun_listener: socket.socket, source: str
) -> None:
    page = page_for(stun_listener)
    target = (
        {"document": page}
        if source == "document"
        else {"url": f"{site.base}/page?html={urllib.parse.quote(page)}"}
    )
    body = {
        "attempt_id": f"webrtc-{source}",
        **target,
        "width": 200,
        "height": 100,
        "wait": {"selector": "#done"},
    }
    assert renderer.submit_one(body).status_code == 202
    receipt, page = renderer.wait_page(f"webrtc-{source}")
    # the mark has text (an empty div is never visible, and the wait would run to the deadline)
    assert (receipt["status"], page["status"]) == ("succeeded", "succeeded"), receipt
    assert received(stun_listener) == []
