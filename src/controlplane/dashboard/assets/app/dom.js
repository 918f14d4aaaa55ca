// DOM helpers: $ (query), el (an element from attributes and children), clear, enc.

export const $ = (sel, root = document) => root.querySelector(sel);

// el('td', {class: 'x', dataset: {state: 'done'}, title: 't'}, 'text', node)
export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  if (attrs) {
    for (const [key, value] of Object.entries(attrs)) {
      if (value === undefined || value === null || value === false) continue;
      if (key === 'style') throw new Error('no inline styles (CSP): use a class');
      if (key === 'class') node.className = value;
      else if (key === 'dataset') {
        for (const [k, v] of Object.entries(value)) if (v !== undefined && v !== null) node.dataset[k] = String(v);
      }
      else if (key === 'text') node.textContent = value;
      else if (key === 'hidden') node.hidden = Boolean(value);
      else node.setAttribute(key, value === true ? '' : String(value));
    }
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(node, child);
    else node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

export function clear(node) {
  while (node.firstChild) node.firstChild.remove();
  return node;
}

export const enc = encodeURIComponent;
