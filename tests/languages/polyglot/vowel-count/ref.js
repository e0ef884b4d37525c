const line = require("fs").readFileSync(0, "utf8").split("\n")[0];
console.log(String([...line].filter((c) => "aeiouAEIOU".includes(c)).length));
