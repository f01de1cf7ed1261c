"""The page's layout as Chromium laid it out, for an export that rebuilds a slide as shapes.

One script walks the rendered document once (after the capture, in the same visit) and
returns plain JSON: every text block with its box and styled runs, list items with their
marker and level, tables cell by cell, images and code blocks with their boxes, boxes that
paint a background colour or a border, and `blockers`: what paints that the export cannot
rebuild (SVG, canvas, math, a transform, a background image, a filter, ...), each named with
its element. Marp's slide wrapper (`<svg data-marpit-svg>` around the section, in a
`foreignObject`) is walked through when it draws at scale 1, and its page number
(`section::after`) is a text box; the text kept for a blocked element is what a reader sees
(`innerText`: nothing `visibility: hidden` hides). The renderer only describes; deciding and
building happen in the caller's process (`deckyard.outputs`). The walk is bounded: at most
`max_items` items and `max_chars` characters of text in all; past either, `truncated` is set
and the rest is left out.
"""

from __future__ import annotations

from typing import Any

from playwright.async_api import Page

LAYOUT_SCRIPT = """([maxItems, maxChars]) => {
  const items = [], blockers = [];
  let chars = 0, truncated = false;
  const vw = window.innerWidth, vh = window.innerHeight;
  const BLOCKING = new Set(['svg', 'canvas', 'video', 'audio', 'iframe', 'object', 'embed',
    'math']);
  const SKIP = new Set(['script', 'style', 'template', 'noscript', 'head', 'link', 'meta']);
  const name = (el) => {
    let n = el.tagName.toLowerCase();
    if (el.id) n += '#' + el.id;
    if (el.classList && el.classList.length) {
      n += '.' + Array.from(el.classList).slice(0, 2).join('.');
    }
    return n;
  };
  const box = (r) => [r.left, r.top, r.width, r.height].map((v) => Math.round(v * 100) / 100);
  const block = (why, el) => {
    if (blockers.length < 20) blockers.push(why + ' (' + name(el) + ')');
  };
  const room = () => {
    if (items.length >= maxItems || chars >= maxChars) { truncated = true; return false; }
    return true;
  };
  const take = (text) => {
    const left = Math.max(0, maxChars - chars);
    if (text.length > left) { truncated = true; text = text.slice(0, left); }
    chars += text.length;
    return text;
  };
  const visible = (el, cs) => cs.display !== 'none' &&
    el.checkVisibility({ opacityProperty: true, visibilityProperty: true });
  // the text a reader sees: innerText leaves out what `visibility: hidden` hides (a step's
  // items not shown yet); an SVG has no innerText, its HTML (foreignObject) has
  const visibleText = (el) => {
    if (el instanceof HTMLElement) return el.innerText || '';
    const html = Array.from(el.querySelectorAll('foreignObject > *'));
    return html.length ? html.map((c) => c.innerText || '').join(' ') : (el.textContent || '');
  };
  const isBlock = (cs) => !cs.display.startsWith('inline') && cs.display !== 'contents';
  const paintBlockers = (el, cs) => {
    if (cs.transform !== 'none') block('a CSS transform', el);
    if (cs.backgroundImage !== 'none') block('a background image or gradient', el);
    if (cs.filter !== 'none' || cs.backdropFilter !== 'none') block('a CSS filter', el);
    if (cs.mixBlendMode !== 'normal') block('a blend mode', el);
    const masked = cs.maskImage && cs.maskImage !== 'none';
    if (cs.clipPath !== 'none' || masked) block('a clip or mask', el);
    if (cs.boxShadow !== 'none') block('a box shadow', el);
    if (cs.textShadow !== 'none') block('a text shadow', el);
    if (parseFloat(cs.opacity) < 1) block('partial opacity', el);
    if (cs.writingMode !== 'horizontal-tb') block('vertical writing', el);
    for (const pseudo of ['::before', '::after']) {
      const ps = getComputedStyle(el, pseudo);
      if (ps.content !== 'none' && ps.content !== 'normal' && ps.display !== 'none') {
        const number = pageNumber(el, pseudo, ps);
        if (number) items.push(number);
        else block('generated content (' + pseudo + ')', el);
      }
    }
  };
  // Marp's page number: `section::after { content: attr(data-marpit-pagination) }`, placed
  // absolutely in its section. Its text is the attribute and its box follows from the
  // pseudo-element's own offsets and size; any other generated content stays a blocker.
  const pageNumber = (el, pseudo, ps) => {
    const text = el.getAttribute('data-marpit-pagination');
    const content = ps.content.trim();
    if (pseudo !== '::after' || !text || ps.position !== 'absolute' ||
        getComputedStyle(el).position === 'static' ||
        (content !== 'attr(data-marpit-pagination)' && content !== JSON.stringify(text))) {
      return null;
    }
    const r = el.getBoundingClientRect();
    const px = (v) => parseFloat(v) || 0;
    const border = ps.boxSizing === 'border-box';
    const w = px(ps.width) + (border ? 0 : px(ps.paddingLeft) + px(ps.paddingRight));
    const h = px(ps.height) + (border ? 0 : px(ps.paddingTop) + px(ps.paddingBottom));
    const left = ps.left !== 'auto' ? r.left + px(ps.left) : r.right - px(ps.right) - w;
    const top = ps.top !== 'auto' ? r.top + px(ps.top) : r.bottom - px(ps.bottom) - h;
    const fam = family(ps);
    return { kind: 'text', tag: 'span', box: box({ left, top, width: w, height: h }), level: 0,
      marker: null, runs: [{ text: take(text), size: px(ps.fontSize),
        bold: parseInt(ps.fontWeight, 10) >= 600, italic: ps.fontStyle !== 'normal',
        underline: false, strike: false, color: ps.color, font: fam, mono: false, link: null }],
      ...paragraph(ps) };
  };
  const family = (cs) => cs.fontFamily.split(',').map((f) => f.trim().replace(/^["']|["']$/g, ''));
  const runStyle = (el) => {
    const cs = getComputedStyle(el);
    const fam = family(cs);
    return {
      size: parseFloat(cs.fontSize), bold: parseInt(cs.fontWeight, 10) >= 600,
      italic: cs.fontStyle !== 'normal', underline: cs.textDecorationLine.includes('underline'),
      strike: cs.textDecorationLine.includes('line-through'), color: cs.color, font: fam,
      mono: fam.some((f) => /mono|courier|consolas|menlo/i.test(f)) ||
        !!el.closest('code, kbd, samp, pre'),
      link: el.closest('a') ? el.closest('a').getAttribute('href') : null,
    };
  };
  // The runs of a block: its text nodes and <br>s, stopping at nested blocks (their own items).
  const runs = (root, pre) => {
    const out = [];
    const visit = (node) => {
      for (const child of node.childNodes) {
        if (child.nodeType === 3) {
          let text = child.data;
          if (!pre) text = text.replace(/\\s+/g, ' ');
          if (!text) continue;
          out.push({ text: take(text), ...runStyle(child.parentElement) });
        } else if (child.nodeType === 1) {
          const tag = child.tagName.toLowerCase();
          if (SKIP.has(tag) || BLOCKING.has(tag) || tag === 'img') continue;
          const cs = getComputedStyle(child);
          if (!visible(child, cs)) continue;
          if (tag === 'br') { out.push({ text: '\\n', ...runStyle(node) }); continue; }
          if (isBlock(cs) || tag === 'table' || tag === 'ul' || tag === 'ol') continue;
          visit(child);
        }
      }
    };
    visit(root);
    if (!pre && out.length) {
      out[0].text = out[0].text.replace(/^ /, '');
      out[out.length - 1].text = out[out.length - 1].text.replace(/ $/, '');
    }
    return out.filter((r) => r.text);
  };
  const hasOwnText = (el) => Array.from(el.childNodes).some((n) =>
    (n.nodeType === 3 && n.data.trim()) ||
    (n.nodeType === 1 && !['img', 'br'].includes(n.tagName.toLowerCase()) &&
     !isBlock(getComputedStyle(n)) && (n.textContent || '').trim()));
  const paragraph = (cs) => ({
    align: cs.textAlign, lineHeight: cs.lineHeight === 'normal' ? null : parseFloat(cs.lineHeight),
    padding: [cs.paddingLeft, cs.paddingTop, cs.paddingRight, cs.paddingBottom].map(parseFloat),
  });
  const border = (cs) => {
    const w = parseFloat(cs.borderTopWidth);
    const same = ['Right', 'Bottom', 'Left'].every((s) =>
      parseFloat(cs['border' + s + 'Width']) === w &&
      cs['border' + s + 'Color'] === cs.borderTopColor);
    return { width: cs.borderTopStyle === 'none' ? 0 : w, color: cs.borderTopColor, uniform: same,
      any: ['Top', 'Right', 'Bottom', 'Left'].some((s) =>
        cs['border' + s + 'Style'] !== 'none' && parseFloat(cs['border' + s + 'Width']) > 0) };
  };
  const transparent = (c) => !c || c === 'transparent' || /rgba\\(.*,\\s*0\\)$/.test(c);
  const marker = (li, cs) => {
    const list = li.parentElement;
    const type = cs.listStyleType;
    if (type === 'none' || cs.display !== 'list-item') return null;
    if (/decimal|alpha|roman/.test(type)) {
      const ol = list && list.tagName === 'OL';
      const start = ol ? (parseInt(list.getAttribute('start'), 10) || 1) : 1;
      const siblings = Array.from(list ? list.children : []).filter((c) => c.tagName === 'LI');
      const nth = siblings.indexOf(li);
      return { type, number: start + Math.max(nth, 0) };
    }
    return { type };
  };
  const walk = (el, level) => {
    const tag = el.tagName.toLowerCase();
    if (SKIP.has(tag) || (el.classList && el.classList.contains('dy-notes'))) return;
    const cs = getComputedStyle(el);
    if (!visible(el, cs)) return;
    const r = el.getBoundingClientRect();
    const shown = r.width > 1 && r.height > 1 && r.right > 0 && r.bottom > 0 &&
      r.left < vw && r.top < vh;
    if (!room()) return;
    if (tag === 'svg' && el.hasAttribute('data-marpit-svg')) {
      // Marp's slide wrapper: the section inside is laid out at the slide's own size; at
      // scale 1 its boxes and fonts are the page's, so it is walked as any HTML
      const vb = el.viewBox && el.viewBox.baseVal;
      const scale = vb && vb.width ? r.width / vb.width : 0;
      if (Math.abs(scale - 1) <= 0.01) {
        for (const fo of el.querySelectorAll(':scope > foreignObject')) {
          for (const child of fo.children) walk(child, level);
        }
        return;
      }
    }
    if (BLOCKING.has(tag) || (el.classList && el.classList.contains('mermaid'))) {
      block(tag === 'math' ? 'math' : 'a ' + tag + ' element', el);
      const text = visibleText(el).replace(/\\s+/g, ' ').trim();
      if (text && shown) items.push({ kind: 'text', tag, box: box(r), hidden_only: true,
        runs: [{ text: take(text), ...runStyle(el) }], ...paragraph(cs) });
      return;
    }
    paintBlockers(el, cs);
    const b = border(cs);
    const fill = transparent(cs.backgroundColor) ? null : cs.backgroundColor;
    if ((fill || b.any) && shown && tag !== 'html' && tag !== 'body' && tag !== 'table' &&
        tag !== 'td' && tag !== 'th' && tag !== 'tr') {
      if (b.any && !b.uniform) block('an uneven border', el);
      items.push({ kind: 'box', tag, box: box(r), fill, line: b.width > 0 ? b.color : null,
        lineWidth: b.width, radius: parseFloat(cs.borderTopLeftRadius) || 0 });
    }
    if (tag === 'img') {
      const src = (el.currentSrc || el.src || '').slice(0, 200);
      if (shown) items.push({ kind: 'image', box: box(r), src, alt: el.getAttribute('alt') || '' });
      return;
    }
    if (tag === 'table') {
      const rows = [];
      let merged = false;
      for (const row of el.rows) {
        const cells = [];
        for (const cell of row.cells) {
          if (cell.colSpan > 1 || cell.rowSpan > 1) merged = true;
          const ccs = getComputedStyle(cell);
          cells.push({ box: box(cell.getBoundingClientRect()), runs: runs(cell, false),
            fill: transparent(ccs.backgroundColor) ? null : ccs.backgroundColor,
            tag: cell.tagName.toLowerCase(), ...paragraph(ccs),
            borders: ['Left', 'Right', 'Top', 'Bottom'].map((side) =>
              ccs['border' + side + 'Style'] === 'none' ? [0, null]
                : [parseFloat(ccs['border' + side + 'Width']), ccs['border' + side + 'Color']]) });
          for (const inner of cell.querySelectorAll('*')) {
            const t = inner.tagName.toLowerCase();
            if (BLOCKING.has(t) || t === 'img') block('a ' + t + ' in a table cell', inner);
            else paintBlockers(inner, getComputedStyle(inner));
          }
        }
        rows.push(cells);
      }
      if (merged) block('a table with merged cells', el);
      const cols = rows.length ? Math.max(...rows.map((c) => c.length)) : 0;
      if (rows.some((c) => c.length !== cols)) block('a table with ragged rows', el);
      items.push({ kind: 'table', box: box(r), rows });
      return;
    }
    if (tag === 'pre') {
      items.push({ kind: 'code', box: box(r), runs: runs(el, true),
        fill: transparent(cs.backgroundColor) ? null : cs.backgroundColor, ...paragraph(cs) });
      for (const inner of el.querySelectorAll('*')) paintBlockers(inner, getComputedStyle(inner));
      return;
    }
    const isList = tag === 'ul' || tag === 'ol';
    const own = isBlock(cs) && hasOwnText(el);
    if (own && shown) {
      const found = runs(el, /^pre/.test(cs.whiteSpace));
      if (found.length) {
        items.push({ kind: 'text', tag, box: box(r), runs: found, level,
          marker: tag === 'li' ? marker(el, cs) : null, ...paragraph(cs) });
      }
    }
    for (const child of el.children) {
      const t = child.tagName.toLowerCase();
      const ccs = getComputedStyle(child);
      if (own && !isBlock(ccs) && t !== 'img' && !BLOCKING.has(t)) {
        // an inline child: its text is a run of this block; what it holds may still paint
        paintBlockers(child, ccs);
        for (const inner of child.querySelectorAll('*')) {
          const it = inner.tagName.toLowerCase();
          if (it === 'img' || BLOCKING.has(it)) walk(inner, level);
          else if (isBlock(getComputedStyle(inner))) block('a block inside inline text', inner);
          else paintBlockers(inner, getComputedStyle(inner));
        }
        continue;
      }
      walk(child, level + (isList ? 1 : 0));
    }
  };
  const root = document.body || document.documentElement;
  const rootStyle = getComputedStyle(root);
  const htmlStyle = getComputedStyle(document.documentElement);
  for (const cs of [htmlStyle, rootStyle]) {
    if (cs.backgroundImage !== 'none') block('a background image or gradient', root);
  }
  walk(root, 0);
  const background = !transparent(rootStyle.backgroundColor) ? rootStyle.backgroundColor
    : !transparent(htmlStyle.backgroundColor) ? htmlStyle.backgroundColor : 'rgb(255, 255, 255)';
  return { width: vw, height: vh, background, items, blockers, truncated };
}"""


async def page_layout(page: Page, max_items: int, max_chars: int) -> dict[str, Any]:
    """The laid-out page as `LAYOUT_SCRIPT` describes it (see the module docstring)."""
    found = await page.evaluate(LAYOUT_SCRIPT, [max_items, max_chars])
    return dict(found) if isinstance(found, dict) else {"items": [], "blockers": ["no layout"]}
