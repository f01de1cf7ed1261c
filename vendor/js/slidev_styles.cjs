#!/usr/bin/env node
// Builds the stylesheet of one Slidev deck from Slidev's own packages (Deckyard issue 29).
//
// Reads one JSON object on stdin: {content: [text, ...], fonts: {...} | null}: the deck's
// Markdown (every slide) and its `fonts` front matter.
// Writes one JSON object on stdout: {css} or {error}.
//
// The CSS is what Slidev 53's client loads for a slide, made by the same engine: UnoCSS with
// Slidev's own uno.config.ts (@slidev/client) and the default theme's fonts, over the deck's
// Markdown and the layouts (the utilities they use, as Slidev's Vite plugin extracts them),
// then Slidev's style sheets (@slidev/client/styles, @slidev/theme-default/styles, and the
// layouts' <style> blocks) with their nesting flattened (postcss-nested) and their @apply,
// theme() and --uno expanded (UnoCSS's transformer-directives). Nothing of the deck runs here:
// its Markdown is only scanned for class names. What is left out is what needs Slidev's app
// (transitions, clicks, the twoslash and magic-move styles, KaTeX's fonts), and index.css's
// rule for Slidev's app shell (html, body, #app: a full-window, clipped page).
// Deckyard places Slidev's slide container itself (slidev_layouts.py): the slide carries
// Slidev's `dark` class (so `html.dark` becomes `.dark`, and `html:not(.dark)` the slide's own
// `.dy-slidev:not(.dark)`: a bare `:not(.dark)` would match <html> on a dark slide too, and
// code.css's light Shiki colours, which come later, would win there), the container is the canvas (its size
// and zoom inline), and its text takes the colour schema's text colour, as Slidev's <html> does.
'use strict'

const fs = require('node:fs')
const path = require('node:path')

const CLIENT_STYLES = ['vars.css', 'index.css', 'code.css']
const THEME_STYLES = ['layouts.css', 'prism.css']
const WRAPPER = 'internals/SlideWrapper.vue'
const APP_SHELL = /^html,\s*body,\s*#app,\s*#page-root\s*\{[^}]*\}/m
const CONTAINER =
  '.slidev-slide-content { position: relative; overflow: hidden; color: CanvasText; }\n'

function packageDir(name) {
  return path.dirname(require.resolve(`${name}/package.json`))
}

function read(file) {
  return fs.readFileSync(file, 'utf8')
}

function layoutSources() {
  // The theme's layouts win over the client's of the same name, as in Slidev.
  const found = {}
  for (const dir of [packageDir('@slidev/client'), packageDir('@slidev/theme-default')]) {
    const folder = path.join(dir, 'layouts')
    for (const file of fs.readdirSync(folder).sort()) {
      if (file.endsWith('.vue')) found[file.slice(0, -4)] = read(path.join(folder, file))
    }
  }
  return found
}

// A sheet's `@import 'package/file.css'` inlined, resolved from the sheet's own package (as
// Vite does); imports of imports too.
function inlineImports(css, from) {
  return css.replace(/^@import\s+['"]([^'"]+)['"]\s*;/gm, (_m, target) => {
    const file = require.resolve(target, { paths: [path.dirname(from)] })
    return inlineImports(read(file), file)
  })
}

function styleBlocks(source) {
  const blocks = []
  const pattern = /<style\b[^>]*>([\s\S]*?)<\/style>/g
  let match
  while ((match = pattern.exec(source)) !== null) blocks.push(match[1])
  return blocks
}

async function build(input) {
  const jiti = require('jiti').createJiti(__filename)
  const { createGenerator, mergeConfigs } = await jiti.import('unocss')
  const { transformDirectives } = await jiti.import('@unocss/transformer-directives')
  const { resolveFonts } = await jiti.import('@slidev/parser/core')
  const MagicString = (await jiti.import('magic-string')).default
  const { compileStyle } = require('@vue/compiler-sfc')
  const postcss = require('postcss')
  const nested = require('postcss-nested').default

  const client = packageDir('@slidev/client')
  const theme = packageDir('@slidev/theme-default')
  const unoConfig = await jiti.import(path.join(client, 'uno.config.ts'), { default: true })
  const defaults = JSON.parse(read(path.join(theme, 'package.json'))).slidev.defaults
  const fonts = resolveFonts({ ...(defaults.fonts || {}), ...(input.fonts || {}) })
  const config = mergeConfigs([unoConfig])
  config.theme = config.theme || {}
  config.theme.fontFamily = {
    ...(config.theme.fontFamily || {}),
    sans: fonts.sans.join(','),
    mono: fonts.mono.join(','),
    serif: fonts.serif.join(','),
  }
  const uno = await createGenerator(config)

  const layouts = layoutSources()
  const sheets = [read(require.resolve('@unocss/reset/tailwind.css'))]
  const authored = [
    ...CLIENT_STYLES.map((f) => read(path.join(client, 'styles', f)).replace(APP_SHELL, '')),
    read(path.join(client, 'styles', 'layouts-base.css')),
    ...THEME_STYLES.map((f) => path.join(theme, 'styles', f)).map((f) => inlineImports(read(f), f)),
    ...styleBlocks(read(path.join(client, WRAPPER))),
  ].map((css) => [css, null])
  // A layout's <style scoped> is scoped as Vue scopes it, to the elements of its template
  // (slidev_layouts.py marks them with the same `data-v-slidev-<layout>` attribute).
  for (const [name, source] of Object.entries(layouts)) {
    for (const css of styleBlocks(source)) authored.push([css, `data-v-slidev-${name}`])
  }
  const flat = []
  for (const [css, scope] of authored) {
    const done = await postcss([nested()]).process(css, { from: undefined })
    const code = new MagicString(done.css)
    await transformDirectives(code, uno, {})
    let out = code.toString()
    if (scope) {
      const scoped = compileStyle({ source: out, filename: `${scope}.css`, id: scope, scoped: true })
      if (scoped.errors.length) throw scoped.errors[0]
      out = scoped.code
    }
    flat.push(out)
  }
  const content = [...(input.content || []), ...Object.values(layouts), ...flat].join('\n')
  const generated = await uno.generate(content, { preflights: true })
  const preflights = generated.getLayer('preflights') || ''
  const rest = generated.getLayers(undefined, ['preflights'])
  const css = [...sheets, preflights, ...flat, CONTAINER, rest]
    .join('\n')
    .replace(/html\.dark:root/g, '.dark')
    .replace(/html\.dark/g, '.dark')
    .replace(/html:not\(\.dark\)/g, '.dy-slidev:not(.dark)')
  return { css }
}

function main() {
  const chunks = []
  process.stdin.on('data', (chunk) => chunks.push(chunk))
  process.stdin.on('end', async () => {
    let out
    try {
      out = await build(JSON.parse(Buffer.concat(chunks).toString('utf8')))
    } catch (err) {
      out = { error: String((err && err.message) || err) }
    }
    process.stdout.write(JSON.stringify(out))
  })
}

main()
