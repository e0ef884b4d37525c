const s = require("fs").readFileSync(0, "utf8").trim();
const want = { ")": "(", "]": "[", "}": "{" };
const stack = [];
let ok = true;
for (const c of s) {
  if ("([{".includes(c)) stack.push(c);
  else if (stack.pop() !== want[c]) {
    ok = false;
    break;
  }
}
console.log(ok && stack.length === 0 ? "YES" : "NO");
