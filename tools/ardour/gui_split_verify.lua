-- usage: ardour7-lua gui_split_verify.lua DIR NAME "Guitar@POS:LEN,Keys@POS:LEN" MUTE SETS [STEMS]
-- The split action's result, from the saved session (exit 1 on failure). For each source track
-- T, in the order given: SETS sets of stem tracks "T - <stem>" (STEMS, a comma list, default
-- vocals,drums,bass,other; Ardour numbers a second
-- set "T - <stem> 1"), right after T and before the next source track; each stem track holds
-- one region at POS with length LEN; each set is one route group; T's region muted when MUTE is
-- 1; and every set's four stems add back to T's region as it sounds (its gain, trim and fades;
-- read with the region unmuted in memory) within 1e-4.
local dir, name, spec = arg[1], arg[2], arg[3]
local mute, sets = arg[4] == "1", math.tointeger (tonumber (arg[5] or "1"))
assert (AudioEngine:set_backend ("None (Dummy)", "", ""), "no dummy backend")
assert (load_session (dir, name), "load_session failed")
local ok = true
local function fail (m) print ("FAIL " .. m); ok = false end
local STEMS = {}
for st in (arg[6] or "vocals,drums,bass,other"):gmatch ("[^,]+") do STEMS[#STEMS + 1] = st end
local B = 8192
local buf, mix, gain, acc = ARDOUR.DSP.DspShm (B), ARDOUR.DSP.DspShm (B), ARDOUR.DSP.DspShm (B), ARDOUR.DSP.DspShm (B)

-- route name -> its route group's name (7.3's Lua has no Route:route_group ())
local group_of = {}
for g in Session:route_groups ():iter () do
	for r in g:route_list ():iter () do group_of[r:name ()] = g:name () end
end
for r in Session:get_routes ():iter () do
	if not r:to_track ():isnil () then
		for reg in r:to_track ():playlist ():region_list ():iter () do
			print (string.format ("track=%-20s order=%2d group=%-22s region=%-24s pos=%d len=%d muted=%s",
				r:name (), r:presentation_info_ptr ():order (), group_of[r:name ()] or "-", reg:name (),
				reg:position ():samples (), reg:length ():samples (), tostring (reg:muted ())))
		end
	end
end

-- the largest |sum of the stems - source| over [pos, pos + len), and the source's peak
local function add_back (src, stracks, pos, len, nch)
	local maxdiff, peak = 0, 0
	for c = 0, nch - 1 do
		local done = 0
		while done < len do
			local n = math.min (B, len - done)
			src:playlist ():to_audioplaylist ():read (buf:to_float (0), mix:to_float (0), gain:to_float (0),
				Temporal.timepos_t (pos + done), Temporal.timecnt_t (n), c)
			local want = buf:to_float (0):get_table (n)
			local sum = {}
			for i = 1, n do sum[i] = 0 end
			for _, st in ipairs (stracks) do
				st:playlist ():to_audioplaylist ():read (acc:to_float (0), mix:to_float (0), gain:to_float (0),
					Temporal.timepos_t (pos + done), Temporal.timecnt_t (n), c)
				local v = acc:to_float (0):get_table (n)
				for i = 1, n do sum[i] = sum[i] + v[i] end
			end
			for i = 1, n do
				maxdiff = math.max (maxdiff, math.abs (sum[i] - want[i]))
				peak = math.max (peak, math.abs (want[i]))
			end
			done = done + n
		end
	end
	return maxdiff, peak
end

local next_order = nil
for tname, pos, len in string.gmatch (spec, "([^@,]+)@(%d+):(%d+)") do
	pos, len = math.tointeger (tonumber (pos)), math.tointeger (tonumber (len))
	local src = Session:route_by_name (tname)
	if src:isnil () then fail ("no track " .. tname) goto next end
	local sorder = src:presentation_info_ptr ():order ()
	if next_order and sorder ~= next_order then
		fail (string.format ("%s at order %d, want %d (after the previous track's stems)", tname, sorder, next_order))
	end
	next_order = sorder + #STEMS * sets + 1
	local sreg
	for x in src:to_track ():playlist ():region_list ():iter () do sreg = x end
	if mute ~= sreg:muted () then fail (tname .. ": source region muted=" .. tostring (sreg:muted ())) end
	sreg:set_muted (false)
	for set = 0, sets - 1 do
		local stracks, group = {}, nil
		for k, stem in ipairs (STEMS) do
			local tn = tname .. " - " .. stem .. (set > 0 and (" " .. set) or "")
			local r = Session:route_by_name (tn)
			if r:isnil () then fail ("no track " .. tn) goto nextset end
			local o = r:presentation_info_ptr ():order ()
			if o <= sorder or o > sorder + #STEMS * sets then
				fail (string.format ("%s at order %d: not right after %s (%d)", tn, o, tname, sorder))
			end
			local g = group_of[tn]
			if not g then fail (tn .. " is in no route group")
			elseif group and g ~= group then fail (tn .. " in group " .. g .. ", its set in " .. group)
			else group = g end
			local n = 0
			for reg in r:to_track ():playlist ():region_list ():iter () do
				n = n + 1
				if reg:position ():samples () ~= pos or reg:length ():samples () ~= len then
					fail (string.format ("%s: region at %d length %d, want %d length %d", tn,
						reg:position ():samples (), reg:length ():samples (), pos, len))
				end
				if reg:muted () then fail (tn .. ": its region is muted") end
			end
			if n ~= 1 then fail (tn .. ": " .. n .. " regions, want 1") end
			stracks[#stracks + 1] = r:to_track ()
		end
		do
			local d, peak = add_back (src:to_track (), stracks, pos, len, sreg:to_audioregion ():n_channels ())
			print (string.format ("%s set %d (group %s): max |stems - source| = %.3g, source peak %.3f",
				tname, set, tostring (group), d, peak))
			if d > 1e-4 or peak < 1e-3 then fail (tname .. ": stems do not add back to the region as it sounds") end
		end
		::nextset::
	end
	::next::
end
collectgarbage ()
close_session ()
if not ok then error ("VERIFY FAILED") end
print ("VERIFY OK")
