let n = Number(require("fs").readFileSync(0, "utf8").trim());
const values = [1000, 900, 500, 400, 100, 90, 50, 40, 10, 9, 5, 4, 1];
const symbols = ["M", "CM", "D", "CD", "C", "XC", "L", "XL", "X", "IX", "V", "IV", "I"];
let out = "";
values.forEach((v, i) => {
  while (n >= v) {
    out += symbols[i];
    n -= v;
  }
});
console.log(out);
