"""QR codes drawn on the server, as SVG put inline in the page (no image
request, no script; the Content-Security-Policy stays as it is)."""

import qrcode
import qrcode.image.svg
from django.utils.safestring import SafeString, mark_safe


def qr_svg(data: str) -> SafeString:
    """``data`` as an SVG QR code: only path data and numbers come from the
    library, so the markup is safe to put in a page as it is."""
    image = qrcode.make(data, image_factory=qrcode.image.svg.SvgPathImage, box_size=10, border=2)
    svg = image.to_string(encoding="unicode")
    # An accessible name; the size comes from the page's style sheet.
    svg = svg.replace("<svg ", '<svg role="img" aria-label="QR code: scan it with your authenticator app" ', 1)
    return mark_safe(svg)  # noqa: S308  (the library's own markup, no user text in it)
