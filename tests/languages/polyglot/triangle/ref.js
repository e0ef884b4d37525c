const s = require("fs").readFileSync(0, "utf8").trim().split(/\s+/).map(Number);
s.sort((x, y) => x - y);
if (s[0] + s[1] <= s[2]) console.log("invalid");
else if (s[0] === s[2]) console.log("equilateral");
else if (s[0] === s[1] || s[1] === s[2]) console.log("isosceles");
else console.log("scalene");
