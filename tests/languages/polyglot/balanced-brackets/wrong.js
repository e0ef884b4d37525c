const s = require("fs").readFileSync(0, "utf8").trim();
const depth = { "(": 0, "[": 0, "{": 0 };
const open = { ")": "(", "]": "[", "}": "{" };
let ok = true;
for (const c of s) {
  if (c in depth) depth[c]++;
  else if (--depth[open[c]] < 0) ok = false;
}
console.log(ok && Object.values(depth).every((v) => v === 0) ? "YES" : "NO");
