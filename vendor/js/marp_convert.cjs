#!/usr/bin/env node
// Converts one Marp deck with @marp-team/marp-core, the engine Marp CLI uses (Deckyard issue 29).
//
// Reads one JSON object on stdin: {markdown, themes: [css, ...], defaultTheme, html: bool}.
// Writes one JSON object on stdout: {css, slides: [{html, width, height, comments}], script}
// or {error}.
// The options are Marp CLI's defaults (breaks, inline SVG, MathJax unless `math: katex`, the
// default HTML allow-list), except what would need the network at render time: emoji stay
// Unicode text (Marp CLI loads Twemoji images from a CDN) and KaTeX's fonts are the package's
// own woff2 files, inlined as data: URIs (marp-core points them at a CDN by default).
'use strict'

const fs = require('node:fs')
const path = require('node:path')

const FONT_PREFIX = 'deckyard-katex-fonts/'

function katexFonts() {
  const main = require.resolve('katex', {
    paths: [path.dirname(require.resolve('@marp-team/marp-core'))],
  })
  // .../katex/dist/katex.js -> .../katex/dist/fonts
  return path.join(path.dirname(main), 'fonts')
}

function inlineKatexFonts(css) {
  if (!css.includes(FONT_PREFIX)) return css
  const dir = katexFonts()
  // Each KaTeX @font-face lists woff2, woff and ttf; keep the woff2 one, inlined.
  return css.replace(/src:\s*url\(["']?deckyard-katex-fonts\/([\w-]+)\.woff2["']?\)[^;}]*/g, (_m, name) => {
    const data = fs.readFileSync(path.join(dir, `${name}.woff2`)).toString('base64')
    return `src:url(data:font/woff2;base64,${data}) format("woff2")`
  })
}

function convert(input) {
  const { Marp } = require('@marp-team/marp-core')
  const marp = new Marp({
    html: input.html ? undefined : false,
    math: { katexFontPath: FONT_PREFIX },
    emoji: { shortcode: true, unicode: false },
    script: false,
  })
  // Like Marp CLI's --theme-set: every CSS file of the deck with a `@theme` name is a theme
  // the deck may choose; the deck's named theme file is the default (Marp CLI's --theme).
  ;(input.themes || []).forEach((css, i) => {
    let theme
    try {
      theme = marp.themeSet.add(css)
    } catch (err) {
      if (i === input.defaultTheme) throw err
      return
    }
    if (i === input.defaultTheme) marp.themeSet.default = theme
  })
  const { html, css, comments } = marp.render(input.markdown, { htmlAsArray: true })
  const slides = html.map((section, i) => {
    const box = /viewBox="0 0 (\d+(?:\.\d+)?) (\d+(?:\.\d+)?)"/.exec(section)
    return {
      html: section,
      width: box ? Math.round(Number(box[1])) : 1280,
      height: box ? Math.round(Number(box[2])) : 720,
      comments: comments[i] || [],
    }
  })
  const core = path.dirname(require.resolve('@marp-team/marp-core/package.json'))
  const script = fs.readFileSync(path.join(core, 'lib', 'browser.js'), 'utf8')
  return { css: inlineKatexFonts(css), slides, script }
}

function main() {
  const chunks = []
  process.stdin.on('data', (chunk) => chunks.push(chunk))
  process.stdin.on('end', () => {
    let out
    try {
      out = convert(JSON.parse(Buffer.concat(chunks).toString('utf8')))
    } catch (err) {
      out = { error: String((err && err.message) || err) }
    }
    process.stdout.write(JSON.stringify(out))
  })
}

main()
