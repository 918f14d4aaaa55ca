// Lets xterm.js style itself under the CSP (style-src 'self') through the CSSOM, on the shell page only.

// xterm.js 6 styles its DOM renderer with <style> elements it fills with
// text, and truecolour cells with setAttribute('style', …); the CSP
// (style-src 'self') refuses both as inline styles. On the shell page
// only, both go through the CSSOM instead, which the CSP allows and which
// any script could use anyway (the CSP's protection against styles in
// parsed markup, the part an injection could use, is untouched):
// (1) createElement('style') makes an inert <exo-style> element (hidden by
//     app.css) whose text is copied into a constructed stylesheet;
// (2) setAttribute('style', v) on an HTML element sets element.style.cssText.
const STYLE_TAG = 'exo-style';
export function cspStyleBridge(root) {
  const nativeSetAttribute = Element.prototype.setAttribute;
  Element.prototype.setAttribute = function setAttribute(name, value) {
    if (this instanceof HTMLElement && String(name).toLowerCase() === 'style') {
      this.style.cssText = String(value);
      return;
    }
    nativeSetAttribute.call(this, name, value);
  };
  const nativeCreateElement = Document.prototype.createElement;
  Document.prototype.createElement = function createElement(name, options) {
    const tag = String(name).toLowerCase() === 'style' ? STYLE_TAG : name;
    return nativeCreateElement.call(this, tag, options);
  };
  const sheets = new Map(); // <exo-style> element -> CSSStyleSheet
  const sync = () => {
    for (const scope of [root, document.head]) {
      for (const node of scope.querySelectorAll(STYLE_TAG)) if (!sheets.has(node)) sheets.set(node, new CSSStyleSheet());
    }
    const ours = new Set(sheets.values());
    const others = document.adoptedStyleSheets.filter((sheet) => !ours.has(sheet));
    for (const [node, sheet] of sheets) {
      if (!node.isConnected) sheets.delete(node);
      else sheet.replaceSync(node.textContent || '');
    }
    document.adoptedStyleSheets = [...others, ...sheets.values()];
  };
  const touches = (n) => n.nodeType === Node.ELEMENT_NODE && (n.localName === STYLE_TAG || n.querySelector(STYLE_TAG));
  const observer = new MutationObserver((records) => {
    const styles = records.some((rec) => {
      const parent = rec.type === 'characterData' ? rec.target.parentNode : rec.target;
      return (parent && parent.localName === STYLE_TAG) ||
        [...rec.addedNodes].some(touches) || [...rec.removedNodes].some(touches);
    });
    if (styles) sync();
  });
  for (const scope of [root, document.head]) {
    observer.observe(scope, { subtree: true, childList: true, characterData: true });
  }
  sync();
}
