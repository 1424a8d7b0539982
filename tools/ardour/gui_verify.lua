-- usage: ardour7-lua gui_verify.lua DIR NAME START   (exit 1 on failure)
-- The importer made "Guitar - <stem>" tracks, one region each at START, right after Guitar (in
-- the stems' order, before Keys), and muted Guitar's region.
local dir, name, start = arg[1], arg[2], tonumber(arg[3])
assert(AudioEngine:set_backend("None (Dummy)", "", ""), "no dummy backend")
assert(load_session(dir, name), "load_session failed")
local ok = true
local function fail(m) print("FAIL " .. m); ok = false end
local src = Session:route_by_name("Guitar")
local src_order = src:presentation_info_ptr():order()
for r in src:to_track():playlist():region_list():iter() do
	if not r:muted() then fail("source region not muted") end
end
local stems = { "vocals", "drums", "bass", "other", "guitar", "piano" }
local keys = Session:route_by_name("Keys")
if keys:isnil() then fail("no track Keys")
elseif keys:presentation_info_ptr():order() ~= src_order + #stems + 1 then
	fail("Keys at " .. keys:presentation_info_ptr():order() .. ", want " .. src_order + #stems + 1 ..
		" (after the stem tracks)")
end
keys = nil
for k, stem in ipairs(stems) do
	local r = Session:route_by_name("Guitar - " .. stem)
	if not r or r:isnil() then
		fail("no track Guitar - " .. stem)
	else
		local n = 0
		for reg in r:to_track():playlist():region_list():iter() do
			n = n + 1
			print(string.format("track=%s pos=%d len=%d order=%d", r:name(), reg:position():samples(),
				reg:length():samples(), r:presentation_info_ptr():order()))
			if reg:position():samples() ~= start then fail(stem .. " not at " .. start) end
		end
		if n ~= 1 then fail(stem .. ": " .. n .. " regions") end
		if r:presentation_info_ptr():order() ~= src_order + k then
			fail(stem .. " at order " .. r:presentation_info_ptr():order() .. ", want " .. src_order + k ..
				" (right after Guitar)")
		end
	end
end
src = nil
collectgarbage()
close_session()
if not ok then error("VERIFY FAILED") end
print("VERIFY OK")
