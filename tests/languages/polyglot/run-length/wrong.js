const s = require("fs").readFileSync(0, "utf8").trim();
let out = "";
let run = 1;
for (let i = 1; i < s.length; i++) {
  if (s[i] === s[i - 1]) run++;
  else {
    out += s[i - 1] + run;
    run = 1;
  }
}
console.log(out);
